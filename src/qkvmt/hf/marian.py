"""Marian (OPUS-MT): the post-LN encoder-decoder of Vaswani et al., its position table all sines before all
cosines, a bias on the output (final_logits_bias), and a vocabulary per side where the config says so.

Its tokenizer is a SentencePiece model per side, source.spm and target.spm, and ids in vocab.json
(target_vocab.json too where the target vocabulary is its own): a piece's id is its place in vocab.json,
not in the SentencePiece model. Sources are cut with source.spm; text given as a target (a forced pass)
with target.spm, through `target`.
"""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.family import Family
from qkvmt.hf.json_files import token_text
from qkvmt.hf.piece_vocabulary import PieceVocabulary, read_vocabulary, sentencepiece
from qkvmt.model.config import ModelConfig

# MarianConfig's
DEFAULTS = {
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
}


def marian_tokenizer(folder: Path, config: dict) -> PieceVocabulary:
    """The source side of a Marian folder's tokenizer, its `target` the other side."""
    source, target = sentencepiece(folder / "source.spm"), sentencepiece(folder / "target.spm")
    where = folder / "tokenizer_config.json"
    specials = tuple(
        token_text(where, k, config.get(k, d))
        for k, d in (("eos_token", "</s>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"))
    )
    vocab_file, tgt_file = folder / "vocab.json", folder / "target_vocab.json"
    vocab = read_vocabulary(vocab_file)
    if config.get("separate_vocabs"):
        if not tgt_file.is_file():
            raise UserError(f"{folder}: tokenizer_config.json says separate_vocabs, but there is no target_vocab.json")
        tgt_vocab = read_vocabulary(tgt_file)
        side = PieceVocabulary(source, vocab, tgt_vocab, target, specials, files=(vocab_file, tgt_file))
        side.target = PieceVocabulary(target, tgt_vocab, tgt_vocab, target, specials, files=(tgt_file, tgt_file))
    else:
        side = PieceVocabulary(source, vocab, vocab, source, specials, files=(vocab_file, vocab_file))
        side.target = PieceVocabulary(target, vocab, vocab, source, specials, files=(vocab_file, vocab_file))
    return side


def config_keys(c: ModelConfig) -> dict:
    """MarianConfig's keys for a model of `c`: a vocabulary per side unless they are tied."""
    return dict(
        vocab_size=c.vocab_size,
        decoder_vocab_size=c.target_vocab_size,
        share_encoder_decoder_embeddings=c.tie_embeddings,
        bos_token_id=c.bos_id,
    )


MARIAN = Family(
    model_type="marian",
    title="Marian",
    defaults=DEFAULTS,
    norm_first=False,
    sinusoidal_layout="halves",
    output_bias=True,
    shares_vocabulary=lambda flag: flag("share_encoder_decoder_embeddings"),
    tokenizer_files=("source.spm", "target.spm", "vocab.json"),
    other_files=("target_vocab.json",),
    open_tokenizer=marian_tokenizer,
    layouts=("interleaved", "halves"),  # ours is Marian's with the residual stream renamed (export.hf_weights)
    config_class="MarianConfig",
    model_class="MarianMTModel",
    config_keys=config_keys,
)
