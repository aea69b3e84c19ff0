"""How a model is trained: the LightningModule, learning-rate schedules, fault handling and exact
resume, the progress lines and a training run's host memory (its need and record; the host's own
facts are qkvmt.host).

A new schedule, callback or training objective goes here."""
