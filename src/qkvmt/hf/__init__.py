"""Hugging Face model folders opened in qkvmt: Marian (OPUS-MT) and M2M100 (NLLB's dense models too).

Each model family, a config.json's model_type, is one module (marian, m2m100) and one row of the table in
families: how its config maps to a ModelConfig, which tokenizer files it has and how they open, and how a
model is written back as one (qkvmt.export.to_huggingface). What the families share is in shared modules:
a folder's config.json becomes a ModelConfig (config, which maps the generation settings too), its weights
our own blocks' state dict (weights, by the one name table of names), its tokenizer files an object with the
methods qkvmt calls on a `tokenizers.Tokenizer` (tokenizers; piece_vocabulary, languages), and the whole a
checkpoint dict that `build_model` takes as it takes a .ckpt file's (folder); `hf:ORG/NAME` names a folder
in huggingface_hub's cache (hub). Nothing here runs transformers' modules: the model is qkvmt's
Transformer, so every view, edit and alignment reads what runs.
"""
