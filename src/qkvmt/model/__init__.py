"""The Transformer and what defines it: its typed configuration, the inputs it takes, the
position encodings, the one attention class serving self- and cross-attention, the layers, the
loss, and the plain-data checkpoint that rebuilds it (with its typed metadata).

A new way to encode positions goes in positions.py, handed to MultiHeadAttention; a new
attention variant or layer goes here too."""
