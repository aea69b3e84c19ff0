"""Hugging Face model folders opened in qkvmt: Marian (OPUS-MT) and M2M100 (NLLB's dense models too).

A folder's config.json becomes a ModelConfig (config), its weights our own blocks' state dict (weights),
its tokenizer files an object with the methods qkvmt calls on a `tokenizers.Tokenizer` (tokenizers), and
the whole a checkpoint dict that `build_model` takes as it takes a .ckpt file's (folder); `hf:ORG/NAME`
names a folder in huggingface_hub's cache (hub). Nothing here runs transformers' modules: the model is
qkvmt's Transformer, so every view, edit and alignment reads what runs.
"""
