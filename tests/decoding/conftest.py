"""Fixtures of the search's tests."""

import pytest

from qkvmt.model.weights_folder import write_weights_folder
from tests.model.test_weights_folder import nontrivial_model


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A model folder of a non-trivial tiny model (qkvmt.load and the commands read it)."""
    transformer, tokenizer, meta = nontrivial_model()
    out = tmp_path_factory.mktemp("model")
    write_weights_folder(transformer, tokenizer, meta, out)
    return out
