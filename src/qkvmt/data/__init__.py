"""Training data as the model sees it: token-budget batching and the Lightning DataModule that
tokenizes, caches and serves the splits (with alignment labels when a head is supervised)."""
