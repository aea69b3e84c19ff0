"""qkvmt: encoder-decoder Transformers for machine translation, with attention as a first-class output."""

__version__ = "0.1.0"
