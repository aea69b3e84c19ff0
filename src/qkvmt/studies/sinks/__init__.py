"""Where cross-attention's mass goes: each head's mean share of weight on `</s>` and on punctuation
(the columns qkvmt.text.sinks names) over a corpus (corpus), as a result that shows and saves itself
with its figures (result), and the record's table of the measured runs (table)."""
