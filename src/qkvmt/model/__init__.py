"""The Transformer and what defines it: its typed configuration, the inputs it takes, the one
attention class serving self- and cross-attention, the layers, the loss, and the plain-data
checkpoint that rebuilds it.

A new way to encode positions, a new attention variant or layer goes here."""
