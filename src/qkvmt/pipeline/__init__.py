"""Importable entry points behind scripts/*.py: `qkvmt.pipeline.<command>.<command>(cfg)` takes a
Hydra config and returns a dict (`from qkvmt.pipeline.translate import translate`). A command
about a model reads and checks its settings, calls qkvmt.Model (qkvmt.api), saves the result and
prints it; the work is the Model's.

Nothing is imported here, so a command imports only its own modules: translate.py does not wait
for Lightning's trainer to import before it can say that a setting is wrong.
"""
