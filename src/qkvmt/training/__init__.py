"""How a model is trained: the LightningModule, learning-rate schedules, fault handling and exact
resume, the progress lines, the hardware's precision choice and host-memory care.

A new schedule, callback or training objective goes here."""
