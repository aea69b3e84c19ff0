"""Tests for qkvmt.model.config.ModelConfig: settings are checked when the model is configured."""

import pytest

from qkvmt.errors import UserError
from qkvmt.model.config import ModelConfig


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


def test_model_config_names_the_position_encodings_it_knows():
    with pytest.raises(UserError, match=r"model\.positions='bogus': use one of sinusoidal, rotary"):
        ModelConfig(vocab_size=100, positions="bogus")


def test_rotary_positions_need_heads_of_even_width():
    ModelConfig(vocab_size=100, d_model=32, n_heads=4, positions="rotary")  # d_k = 8
    with pytest.raises(UserError, match=r"model\.positions=rotary .* model\.d_model=12 / model\.n_heads=4 = 3"):
        ModelConfig(vocab_size=100, d_model=12, n_heads=4, positions="rotary")


def test_a_stored_config_from_before_positions_were_configurable_is_sinusoidal():
    stored = ModelConfig(vocab_size=100, d_model=32, n_heads=4).to_dict()
    del stored["positions"]
    assert ModelConfig.from_dict(stored).positions == "sinusoidal"
