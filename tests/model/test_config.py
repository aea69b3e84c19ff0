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


@pytest.mark.parametrize(
    "settings, match",
    [
        (dict(activation="tanh"), r"model\.activation='tanh': use one of relu, gelu, swish, silu"),
        (dict(sinusoidal_layout="spiral"), r"model\.sinusoidal_layout='spiral': use one of interleaved, halves"),
        (dict(tgt_vocab_size=0), r"model\.tgt_vocab_size=0: give a positive whole number or null"),
        (dict(tie_output="yes"), r"model\.tie_output='yes': give true, false or null"),
        (dict(tgt_vocab_size=120), r"model\.tgt_vocab_size=120 differs from model\.vocab_size=100: .*tie_embeddings"),
    ],
)
def test_the_settings_of_imported_architectures_are_checked(settings, match):
    with pytest.raises(UserError, match=match):
        ModelConfig(vocab_size=100, **settings)


def test_a_stored_config_from_before_imported_architectures_builds_qkvmts_own_model():
    # The import's settings at their defaults are qkvmt's model: a checkpoint without them loads as before.
    stored = ModelConfig(vocab_size=100, d_model=32, n_heads=4).to_dict()
    added = ("activation", "scale_embeddings", "sinusoidal_layout", "tgt_vocab_size", "tie_output", "output_bias")
    cfg = ModelConfig.from_dict({k: v for k, v in stored.items() if k not in added})
    assert (cfg.activation, cfg.scale_embeddings, cfg.sinusoidal_layout) == ("relu", True, "interleaved")
    assert (cfg.target_vocab_size, cfg.output_tied, cfg.output_bias, cfg.banned_ids) == (100, True, False, [0, 1])
