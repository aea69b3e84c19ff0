"""Tests for qkvmt.model.config.ModelConfig: settings are checked when the model is configured."""

import pytest

from qkvmt.model.config import ModelConfig
from qkvmt.errors import UserError


@pytest.mark.parametrize("field,value", [("d_model", "abc"), ("n_heads", 2.5), ("encoder_layers", True)])
def test_model_config_rejects_settings_that_are_not_whole_numbers(field, value):
    with pytest.raises(UserError, match=rf"model\.{field}=.*give a whole number"):
        ModelConfig(vocab_size=100, **{field: value})


def test_model_config_rejects_heads_that_do_not_divide_the_width():
    with pytest.raises(UserError, match="not divisible"):
        ModelConfig(vocab_size=100, d_model=30, n_heads=4)


def test_model_config_round_trips_through_a_plain_dict():
    cfg = ModelConfig(vocab_size=100, d_model=32, n_heads=4, dropout=0.3)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
