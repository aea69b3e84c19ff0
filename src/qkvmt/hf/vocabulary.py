"""A Hugging Face folder's vocabulary against its weights: every id its tokenizer gives must be a row of the
embedding it goes into, and every row the model can output must have a token, or a translation would fail
when it is written (SentencePiece has no piece of that id) or index past the embedding when it is read."""

from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.hf.piece_vocabulary import PieceVocabulary
from qkvmt.model.config import ModelConfig


def check_vocabulary(tokenizer, cfg: ModelConfig, folder: Path) -> None:
    """A UserError naming the vocabulary file whose ids do not fit the rows of the weights' embeddings."""
    base = getattr(tokenizer, "base", tokenizer)  # a many-to-many tokenizer's languages are numbered in its base
    if not isinstance(base, PieceVocabulary):  # a tokenizer.json, one vocabulary for both sides
        rows = min(cfg.vocab_size, cfg.target_vocab_size)
        fits_rows(base.get_vocab(with_added_tokens=True), rows, folder / "tokenizer.json", cfg)
        return  # the tokenizers library writes an id it has no token for as nothing
    fits_rows(base.vocab, cfg.vocab_size, base.files[0], cfg)
    fits_rows(base.target.vocab, cfg.target_vocab_size, base.target.files[0], cfg)
    rows = cfg.target_vocab_size
    unnamed = [i for i in range(rows) if i not in base.out_names]
    if unnamed:
        raise UserError(
            f"{base.files[1]} has no token for {len(unnamed)} of the model's {rows} output ids (the first: "
            f"{unnamed[0]}), so a translation holding one could not be written: it is not the vocabulary of "
            f"these weights ({sizes(cfg)})"
        )


def fits_rows(vocab: dict[str, int], rows: int, where: Path, cfg: ModelConfig) -> None:
    token, i = max(vocab.items(), key=lambda item: item[1], default=("", -1))
    if i >= rows:
        raise UserError(
            f"{where} gives {token!r} the id {i}, but the embedding it goes into has {rows} rows: it is not the "
            f"vocabulary of these weights ({sizes(cfg)})"
        )


def sizes(cfg: ModelConfig) -> str:
    tgt = f", decoder_vocab_size={cfg.tgt_vocab_size}" if cfg.tgt_vocab_size is not None else ""
    return f"config.json's vocab_size={cfg.vocab_size}{tgt}"
