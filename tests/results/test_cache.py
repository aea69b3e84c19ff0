"""A Cache: its arrays are its tensors, a saved cache loads back the same, a glob keeps what it
matches, and a name it does not hold is one line saying what it holds."""

import re

import numpy as np
import pytest
import torch

from qkvmt.analysis.named_pass import named_pass, names_wanted
from qkvmt.errors import UserError
from qkvmt.model.hook_names import glob_matches
from qkvmt.results.cache import Cache
from qkvmt.text.tokenizer import encode_target
from tests.model.test_weights_folder import nontrivial_model

SOURCES, TARGETS = ["w1 w2 w3 w4", "w5 w6"], ["w7 w8", "w9 w10 w11"]


@pytest.fixture(scope="module")
def cache() -> Cache:
    model, tokenizer, _ = nontrivial_model()
    names = names_wanted(model, ["decoder.*.cross.*", "encoder.0.ffn.hidden", "logits"])
    return Cache.of(named_pass(model, tokenizer, SOURCES, encode_target(tokenizer, TARGETS), names), SOURCES)


def test_numpy_gives_each_tensor(cache):
    arrays = cache.numpy()
    assert list(arrays) == cache.names
    for name, array in arrays.items():
        assert np.array_equal(array, cache[name].numpy())
    assert arrays["decoder.1.cross.mask"].dtype == bool


def test_a_saved_cache_loads_back_the_same(cache, tmp_path):
    loaded = Cache.load(cache.save(tmp_path / "cache"))
    assert loaded.names == cache.names
    for name in cache:
        assert torch.equal(loaded[name], cache[name])
        assert loaded.labels(name) == cache.labels(name)
    assert loaded.to_dict() == cache.to_dict()


def test_filter_keeps_what_a_glob_matches(cache):
    kept = cache.filter("decoder.1.*.weights")
    assert (
        kept.names == [n for n in cache.names if glob_matches("decoder.1.*.weights", n)] == ["decoder.1.cross.weights"]
    )
    assert torch.equal(kept["decoder.1.cross.weights"], cache["decoder.1.cross.weights"])
    assert kept.labels("decoder.1.cross.weights") == cache.labels("decoder.1.cross.weights")
    with pytest.raises(UserError, match="'encoder.1.*' matches nothing in this cache"):
        cache.filter("encoder.1.*")


def test_a_name_the_cache_lacks_or_a_glob_is_one_line(cache):
    with pytest.raises(UserError, match=re.escape(f"cache['missing']: not in this cache; it holds {cache.names[0]}, ")):
        cache["missing"]  # noqa: B018
    with pytest.raises(UserError, match=r"a glob stands for many names; cache\.filter\('decoder\.\*'\) keeps them"):
        cache["decoder.*"]  # noqa: B018
