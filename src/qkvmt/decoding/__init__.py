"""From a trained model to target text: the batched, tensor-only search (greedy and beam) and
the one lines-in, lines-out path every command translates with.

A new search (sampling, constrained decoding) goes here."""
