"""Causal tracing over a corpus: clean and corrupt sources paired (pairs), every slice of the named
activations patched from clean into corrupt in batched passes (patching) and estimated from one
backward pass (attribution), over a corpus (corpus), as a result with its heat map (result)."""
