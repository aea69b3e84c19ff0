"""A Hugging Face config.json (and generation_config.json) as qkvmt's ModelConfig and decoding settings.

Every architectural difference between Marian or M2M100 and qkvmt's own model is a ModelConfig option
(norm_first, activation, scale_embeddings, sinusoidal_layout, tgt_vocab_size, tie_output, output_bias),
so the weights go into the same blocks. A value the blocks cannot compute is a UserError naming it.
"""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.model.config import ACTIVATIONS, ModelConfig

# The defaults of transformers' config classes (MarianConfig, M2M100Config) for the keys read here: an
# older config.json may leave out what equals them.
DEFAULTS = {
    "marian": {
        "activation_function": "gelu",
        "scale_embedding": False,
        "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": True,
        "pad_token_id": 58100,
        "eos_token_id": 0,
        "decoder_start_token_id": 58100,
        "max_position_embeddings": 1024,
        "dropout": 0.1,
        "attention_dropout": 0.0,
        "activation_dropout": 0.0,
    },
    "m2m_100": {
        "activation_function": "relu",
        "scale_embedding": True,
        "tie_word_embeddings": True,
        "pad_token_id": 1,
        "eos_token_id": 2,
        "decoder_start_token_id": 2,
        "max_position_embeddings": 1024,
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "activation_dropout": 0.0,
    },
}
MODEL_TYPES = tuple(DEFAULTS)

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
    "renormalize_logits": False,
}


def model_config(hf: dict, where: Path) -> ModelConfig:
    """The ModelConfig of a config.json's contents `hf` (from the file `where`, which errors name)."""
    kind = hf.get("model_type")
    if kind not in DEFAULTS:
        raise UserError(f"{where}: model_type={kind!r} cannot be imported; qkvmt opens {', '.join(MODEL_TYPES)}")

    def get(key: str):
        return hf.get(key, DEFAULTS[kind].get(key))

    for enc, dec in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if get(enc) != get(dec):
            raise UserError(f"{where}: {enc}={get(enc)} and {dec}={get(dec)} differ; qkvmt's layers share one value")
    activation = get("activation_function")
    if activation not in ACTIVATIONS:
        raise UserError(f"{where}: activation_function={activation!r} is not one of {', '.join(ACTIVATIONS)}")
    pad, eos = get("pad_token_id"), get("eos_token_id")
    if not isinstance(eos, int):  # transformers allows a list of ends; qkvmt's search stops at one
        raise UserError(f"{where}: eos_token_id={eos!r}: qkvmt's search ends at one token, give a whole number")
    vocab = get("vocab_size")
    shared = kind == "m2m_100" or get("share_encoder_decoder_embeddings")
    tgt_vocab = vocab if shared else (hf.get("decoder_vocab_size") or vocab)
    # transformers 5 ties the encoder's and decoder's embeddings to `shared` only with tie_word_embeddings.
    tied = bool(get("tie_word_embeddings"))
    try:
        return ModelConfig(
            vocab_size=vocab,
            d_model=get("d_model"),
            n_heads=get("encoder_attention_heads"),
            encoder_layers=get("encoder_layers"),
            decoder_layers=get("decoder_layers"),
            ffn_dim=get("encoder_ffn_dim"),
            dropout=float(get("dropout")),
            attention_dropout=float(get("attention_dropout")),
            activation_dropout=float(get("activation_dropout")),
            norm_first=kind == "m2m_100",  # M2M100's layers are pre-LN and each stack ends with a LayerNorm
            tie_embeddings=bool(shared) and tied,
            tie_output=tied,
            max_positions=get("max_position_embeddings"),
            activation=activation,
            scale_embeddings=bool(get("scale_embedding")),
            sinusoidal_layout="halves" if kind == "marian" else "fairseq",
            tgt_vocab_size=None if tgt_vocab == vocab else tgt_vocab,
            output_bias=kind == "marian",  # final_logits_bias
            pad_id=pad,
            bos_id=get("decoder_start_token_id"),
            eos_id=eos,
        )
    except UserError as e:  # ModelConfig names its own setting: say which file it came from
        raise UserError(f"{where}: {e}") from None


def decode_settings(gen: dict, cfg: ModelConfig, where: Path) -> dict:
    """The DecodeConfig fields that make qkvmt's search do what transformers' `generate` does with the
    settings `gen` (generation_config.json, or config.json's generation keys in older folders)."""

    def get(key: str):
        return gen.get(key, GENERATION_DEFAULTS[key])

    for key, neutral in NEUTRAL.items():
        if gen.get(key, neutral) not in (neutral, None):
            raise UserError(f"{where}: {key}={gen[key]!r} is not in qkvmt's search (greedy or beam search)")
    if get("early_stopping") not in (True, False):
        raise UserError(f"{where}: early_stopping={get('early_stopping')!r}; qkvmt's beam search takes true or false")
    for ids in get("bad_words_ids") or []:
        if len(ids) != 1 or ids[0] not in cfg.banned_ids:
            raise UserError(f"{where}: bad_words_ids holds {ids}; qkvmt's search bans only {cfg.banned_ids}")
    new_tokens = get("max_new_tokens") or get("max_length") - 1  # max_length counts the decoder's start token
    return {
        "beam_size": get("num_beams"),
        "len_penalty": float(get("length_penalty")),
        "len_penalty_style": "fairseq",  # score / length^alpha, the length counting </s>: transformers' too
        "max_len_a": 0.0,
        "max_len_b": new_tokens,
        "min_len": max(1, get("min_length")),  # transformers' min_length counts the start token, ours </s>
        "free_eos_at_limit": get("forced_eos_token_id") == cfg.eos_id,
        "early_stopping": get("early_stopping"),
        "forced_first_id": get("forced_bos_token_id"),  # a one-direction many-to-many model's target language
    }
