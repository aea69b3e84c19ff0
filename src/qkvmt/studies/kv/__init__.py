"""What keys and values are for, measured on a corpus: two source words of each sentence have
their cross-attention keys, values or both swapped (swap), or one word's key or value is taken
from a sentence in which another word stands in its place (patch), and the translation, its
log-probability and the attention map are compared with the original.

words (which words, and what became of their translations), row_edits (site functions that edit
each batch row at its own positions), passes (the sentences, translated and aligned once, and
the batched searches and forced passes under an edit), summary (an edit over its sentences),
swap and patch (the two studies); corpus (both over a corpus, `Model.study`), result (study.md's
tables and the KeyValueStudy that saves them) and table (the record's)."""
