"""The explorer's fixtures: the tiny trained models of both directions, and an Explorer over them."""

import pytest

import qkvmt
from qkvmt.explore.session import Explorer

SOURCE = "w3 w14 w7 w22 w9"  # the toy language: the target is the source reversed, "w" -> "t"
REFERENCE = "t9 t22 t7 t14 t3"


@pytest.fixture(scope="session")
def model(trained_run):
    return qkvmt.load(trained_run["run"] / "checkpoints" / "last.ckpt", device="cpu")


@pytest.fixture(scope="session")
def reverse_model(reverse_run):
    return qkvmt.load(reverse_run["run"] / "checkpoints" / "last.ckpt", device="cpu")


@pytest.fixture(scope="session")
def explorer(model, reverse_model):
    return Explorer(model, reverse_model)
