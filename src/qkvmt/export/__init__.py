"""Trained models in other runtimes' formats: CTranslate2 (with the engine that translates with
an exported folder) and Hugging Face Marian.

A new export format goes here."""
