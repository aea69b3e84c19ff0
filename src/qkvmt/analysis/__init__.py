"""What attention does, beyond its weights: what each key's value adds to a query (value norms,
Kobayashi et al. 2020), and the module inputs a forced pass feeds every attention layer, from
which such analyses recompute Q, K and V.

A new analysis of a trained model's attention (contributions, head importance) goes here."""
