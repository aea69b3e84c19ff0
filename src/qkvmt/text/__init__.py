"""Text on both sides of the model: the subword tokenizer, where parallel text comes from
(files, Hugging Face datasets), and the scores computed on detokenized text (sacreBLEU).

A new source of training text (a corpus format, a dataset hub) goes here."""
