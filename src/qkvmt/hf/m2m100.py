"""M2M100 (NLLB's dense models too): the pre-LN encoder-decoder, each stack ending with a LayerNorm,
fairseq's position table, one vocabulary for both sides and no output bias.

Its tokenizer is one SentencePiece model, sentencepiece.bpe.model, its ids in vocab.json, and a token per
language after them, in the order its tokenizer_config.json (or special_tokens_map.json) lists them as
additional special tokens, or in the order of the table its language_codes names: a many-to-many
tokenizer (qkvmt.hf.languages).
"""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.family import Family
from qkvmt.hf.json_files import shown, typed
from qkvmt.hf.languages import ManyToMany, language_tokens, transformers_languages
from qkvmt.hf.piece_vocabulary import PieceVocabulary, read_vocabulary, sentencepiece
from qkvmt.model.config import ModelConfig

# M2M100Config's
DEFAULTS = {
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
}
SPECIALS = ("<s>", "</s>", "<pad>", "<unk>")


def m2m100_tokenizer(folder: Path, config: dict) -> ManyToMany:
    """M2M100's tokenizer: sentencepiece.bpe.model, vocab.json, and the language tokens numbered after it."""
    vocab = read_vocabulary(folder / "vocab.json")
    tokens = language_tokens(folder, config) or named_languages(folder, config)
    # fairseq pads its dictionary with made-up words after the languages (m2m100_418M's 128112 rows): the
    # model has rows for them, so they are named, as special tokens, which a translation leaves out.
    where = folder / "tokenizer_config.json"
    madeup = typed(
        where, "num_madeup_words", config.get("num_madeup_words", 8), int, "a whole number", lambda v: v >= 0
    )
    names = [token for _, token in tokens] + [f"madeupword{i:04d}" for i in range(madeup)]
    added = {token: len(vocab) + i for i, token in enumerate(names)}  # numbered after vocab.json, in order
    languages = {code: added[token] for code, token in tokens}
    spm = sentencepiece(folder / "sentencepiece.bpe.model")
    files = (folder / "vocab.json",) * 2
    base = PieceVocabulary(spm, vocab, vocab, spm, SPECIALS, added, files)
    return ManyToMany(base, languages, config.get("src_lang"), config.get("tgt_lang"))


def named_languages(folder: Path, config: dict) -> list[tuple[str, str]]:
    """(code, __code__) of each language of the table tokenizer_config.json's language_codes names (m2m100,
    wmt21), in M2M100Tokenizer's order: transformers 5 saves that name and no list of tokens."""
    codes = transformers_languages("m2m_100.tokenization_m2m_100", "M2M100")
    name = config.get("language_codes", "m2m100")  # M2M100Tokenizer's default
    if name not in codes:
        raise UserError(
            f"{folder / 'tokenizer_config.json'}: no language tokens (__de__, ...) among its additional special "
            f"tokens, and language_codes={shown(name)} names none of M2M100's tables "
            f"({', '.join(codes)}): qkvmt numbers M2M100's languages from one of them"
        )
    return [(code, f"__{code}__") for code in codes[name]]


def config_keys(c: ModelConfig) -> dict:
    """M2M100Config's keys for a model of `c`: no layer dropped in training, as ours."""
    return dict(vocab_size=c.vocab_size, encoder_layerdrop=0.0, decoder_layerdrop=0.0)


def refuses(c: ModelConfig) -> str | None:
    if c.output_bias or c.tgt_vocab_size is not None or c.tie_embeddings != c.output_tied:
        return (
            "has one vocabulary, no output bias and ties its embeddings and output layer all or none "
            "(model.output_bias, model.tie_embeddings, model.tie_output)"
        )
    return None


M2M100 = Family(
    model_type="m2m_100",
    title="M2M100",
    defaults=DEFAULTS,
    norm_first=True,
    sinusoidal_layout="fairseq",
    output_bias=False,
    shares_vocabulary=lambda flag: True,
    tokenizer_files=("sentencepiece.bpe.model", "vocab.json"),
    other_files=(),
    open_tokenizer=m2m100_tokenizer,
    layouts=("fairseq",),
    config_class="M2M100Config",
    model_class="M2M100ForConditionalGeneration",
    config_keys=config_keys,
    refuses=refuses,
)
