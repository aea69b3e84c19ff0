"""Trained models in other runtimes' formats: CTranslate2 (with the engine that translates with
an exported folder) Hugging Face Marian, and qkvmt's own safetensors folder, each folder with
its qkvmt.json (metadata.py).

A new export format is a module here and one entry in formats.py's FORMATS."""
