"""A Hugging Face config.json (and generation_config.json) as qkvmt's ModelConfig and decoding settings.

Every architectural difference between a family (qkvmt.hf.families: Marian, M2M100) and qkvmt's own model
is a ModelConfig option (norm_first, activation, scale_embeddings, sinusoidal_layout, tgt_vocab_size,
tie_output, output_bias), so the weights go into the same blocks: the family gives those it fixes and the
defaults of the keys its config.json may leave out. A value the blocks cannot compute is a UserError naming
it.
"""

import math
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.families import family_of
from qkvmt.hf.json_files import shown, typed
from qkvmt.model.config import ACTIVATIONS, ModelConfig

# transformers' GenerationConfig defaults, for the settings read here.
GENERATION_DEFAULTS = {
    "num_beams": 1,
    "length_penalty": 1.0,
    "max_length": 20,
    "max_new_tokens": None,
    "min_length": 0,
    "early_stopping": False,
    "no_repeat_ngram_size": 0,
    "do_sample": False,
    "forced_eos_token_id": None,
    "forced_bos_token_id": None,
    "bad_words_ids": None,
    "renormalize_logits": False,
}
# Settings of `generate` that qkvmt's search does not have, at the values that leave generate as it is:
# a folder that sets another is refused rather than decoded otherwise.
NEUTRAL = {
    "do_sample": False,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "min_new_tokens": None,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "suppress_tokens": None,
    "begin_suppress_tokens": None,
    "forced_decoder_ids": None,
    "sequence_bias": None,
    "exponential_decay_length_penalty": None,
}


# The most positions qkvmt builds a table for (Marian's and M2M100's have 512 or 1024): the table is not among
# the weights, so nothing in the file bounds it, and a config.json may ask for a billion rows.
MAX_POSITIONS = 1 << 16
POSITIVE = "a positive whole number"


def model_config(hf: dict, where: Path) -> ModelConfig:
    """The ModelConfig of a config.json's contents `hf` (from the file `where`, which errors name), each value
    typed and in range before anything is built from it."""
    family = family_of(hf.get("model_type"), where)

    def get(key: str):
        return hf.get(key, family.defaults.get(key))

    def whole(key: str, give: str = POSITIVE, ok=lambda v: v >= 1) -> int:
        return typed(where, key, get(key), int, give, ok)

    def flag(key: str) -> bool:
        return typed(where, key, get(key), bool, "true or false")

    def probability(key: str) -> float:
        return float(typed(where, key, get(key), float, "a probability in [0, 1)", lambda v: 0 <= v < 1))

    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if whole(enc) != whole(dec):
            raise UserError(f"{where}: {enc}={get(enc)} and {dec}={get(dec)} differ; qkvmt's layers share one value")
    activation = get("activation_function")
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise UserError(f"{where}: activation_function={shown(activation)} is not one of {', '.join(ACTIVATIONS)}")
    eos = get("eos_token_id")
    if isinstance(eos, list):  # transformers allows a list of ends; qkvmt's search stops at one
        raise UserError(f"{where}: eos_token_id={eos!r}: qkvmt's search ends at one token, give a whole number")
    vocab = whole("vocab_size")
    shared = family.shares_vocabulary(flag)
    tgt_vocab = vocab if shared or hf.get("decoder_vocab_size") is None else whole("decoder_vocab_size")
    pad, bos = (
        whole(k, f"an id below vocab_size={min(vocab, tgt_vocab)}", lambda v: 0 <= v < min(vocab, tgt_vocab))
        for k in ("pad_token_id", "decoder_start_token_id")
    )
    eos = whole("eos_token_id", f"an id below vocab_size={tgt_vocab}", lambda v: 0 <= v < tgt_vocab)
    # transformers 5 ties the encoder's and decoder's embeddings to `shared` only with tie_word_embeddings.
    tied = flag("tie_word_embeddings")
    settings = dict(
        vocab_size=vocab,
        d_model=whole("d_model"),
        n_heads=whole("encoder_attention_heads"),
        encoder_layers=whole("encoder_layers"),
        decoder_layers=whole("decoder_layers"),
        ffn_dim=whole("encoder_ffn_dim"),
        dropout=probability("dropout"),
        attention_dropout=probability("attention_dropout"),
        activation_dropout=probability("activation_dropout"),
        norm_first=family.norm_first,
        tie_embeddings=shared and tied,
        tie_output=tied,
        max_positions=whole(
            "max_position_embeddings",
            f"a whole number from 2 to {MAX_POSITIONS}",
            lambda v: 2 <= v <= MAX_POSITIONS,
        ),
        activation=activation,
        scale_embeddings=flag("scale_embedding"),
        sinusoidal_layout=family.sinusoidal_layout,
        tgt_vocab_size=None if tgt_vocab == vocab else tgt_vocab,
        output_bias=family.output_bias,
        pad_id=pad,
        bos_id=bos,
        eos_id=eos,
    )
    try:  # outside the values' own checks, which name the file already
        return ModelConfig(**settings)
    except UserError as e:  # ModelConfig names its own setting: say which file it came from
        raise UserError(f"{where}: {e}") from None


def decode_settings(gen: dict, cfg: ModelConfig, where: Path) -> dict:
    """The DecodeConfig fields that make qkvmt's search do what transformers' `generate` does with the
    settings `gen` (generation_config.json, or config.json's generation keys in older folders), each typed."""

    def get(key: str):
        return gen.get(key, GENERATION_DEFAULTS[key])

    def whole(key: str, give: str = POSITIVE, ok=lambda v: v >= 1, null: bool = False) -> int | None:
        return typed(where, key, get(key), int, give, ok, null)

    def target_id(key: str) -> int | None:
        rows = cfg.target_vocab_size
        return whole(key, f"an id below the model's {rows} output rows, or null", lambda v: 0 <= v < rows, null=True)

    for key, neutral in NEUTRAL.items():
        if gen.get(key, neutral) not in (neutral, None):
            raise UserError(f"{where}: {key}={shown(gen[key])} is not in qkvmt's search (greedy or beam search)")
    if get("early_stopping") not in (True, False):
        raise UserError(
            f"{where}: early_stopping={shown(get('early_stopping'))}; qkvmt's beam search takes true or false"
        )
    bad_words = get("bad_words_ids") or []
    if not isinstance(bad_words, list) or not all(isinstance(ids, list) for ids in bad_words):
        raise UserError(f"{where}: bad_words_ids={shown(bad_words)} is not a list of lists of ids")
    for ids in bad_words:
        if len(ids) != 1 or ids[0] not in cfg.banned_ids:
            raise UserError(
                f"{where}: bad_words_ids holds {shown(ids)}; qkvmt's search bans only {cfg.banned_ids}: give "
                f"bad_words_ids={[[i] for i in cfg.banned_ids]} to decode without that ban, or translate with "
                "transformers"
            )
    forced_eos = target_id("forced_eos_token_id")
    if forced_eos not in (None, cfg.eos_id):  # generate would end an output at the limit on that token
        raise UserError(
            f"{where}: forced_eos_token_id={forced_eos} is not eos_token_id={cfg.eos_id}; qkvmt's search ends an "
            f"output with </s>: give {cfg.eos_id} or null"
        )
    max_new = whole("max_new_tokens", null=True)
    # max_length counts the decoder's start token
    new_tokens = max_new or whole("max_length", "a whole number of at least 2", lambda v: v >= 2) - 1
    return {
        "beam_size": whole("num_beams"),
        "len_penalty": float(
            typed(where, "length_penalty", get("length_penalty"), float, "a finite number", math.isfinite)
        ),
        "len_penalty_style": "fairseq",  # score / length^alpha, the length counting </s>: transformers' too
        "max_len_a": 0.0,
        "max_len_b": new_tokens,
        # transformers' min_length counts the start token, ours </s>
        "min_len": max(1, whole("min_length", "a whole number, 0 or more", lambda v: v >= 0)),
        # At the limit generate forces </s> at no cost, or without forced_eos_token_id stops on whatever came
        "free_eos_at_limit": forced_eos is not None,
        "cut_at_limit": forced_eos is None,
        "renormalize": typed(where, "renormalize_logits", get("renormalize_logits"), bool, "true or false"),
        "early_stopping": get("early_stopping"),
        "forced_first_id": target_id("forced_bos_token_id"),  # a one-direction many-to-many model's target language
    }
