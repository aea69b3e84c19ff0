"""SentencePiece vocabularies of a training run (data.tokenizer=sentencepiece or separate_bpe, or a SentencePiece
.model given as data.tokenizer=file), in Marian's file layout: source.spm, target.spm, vocab.json (and
target_vocab.json where the target's vocabulary is its own), tokenizer_config.json. That is how an OPUS-MT model
keeps them, so they open, export and reload as an imported model's tokenizer does (qkvmt.hf.tokenizers).

A model trained here has qkvmt's control ids (SPECIALS: <pad> <s> </s> <unk> at 0..3), so its models' special ids
are the joint BPE's. A piece's id is its SentencePiece id; a model from elsewhere without <pad> gets it after its
pieces, as Marian and fairseq add it.
"""

import io
import json
import logging
import os

from qkvmt.errors import UserError, optional_import
from qkvmt.text.tokenizer import BOS, EOS, PAD, SPECIALS, UNK

log = logging.getLogger(__name__)

MODEL_TYPES = ("unigram", "bpe")


def _sentencepiece():
    return optional_import("sentencepiece", "pip install sentencepiece (or pip install -e '.[hf]' in qkvmt's folder)")


def train_pieces(texts: list[str], vocab_size: int, model_type: str) -> bytes:
    """A SentencePiece model of `texts` (its .model file's bytes) with up to `vocab_size` pieces."""
    spm = _sentencepiece()
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            **{f"{name}_id": i for name, i in zip(("pad", "bos", "eos", "unk"), range(len(SPECIALS)))},
            # a text with fewer pieces than asked gets a smaller vocabulary, as the joint BPE does
            hard_vocab_limit=False,
            # every character of the training text is a piece, as the joint BPE keeps each one
            character_coverage=1.0,
            num_threads=os.cpu_count() or 1,
            minloglevel=2,  # its progress lines are noise in a run's log
        )
    except RuntimeError as e:  # e.g. fewer pieces allowed than the text has characters
        raise UserError(
            f"data.vocab_size={vocab_size}: SentencePiece cannot train on the training text with it "
            f"({str(e).splitlines()[0]}); give a larger data.vocab_size"
        ) from None
    return model.getvalue()


def piece_vocab(model: bytes, name: str) -> dict[str, int]:
    """vocab.json of a SentencePiece model: each piece at its own id, and <pad> after them where the model has
    none. A UserError naming the token and `name` when the model lacks <unk>, <s> or </s> or names one otherwise."""
    spm = _sentencepiece()
    proc = spm.SentencePieceProcessor()
    try:
        proc.LoadFromSerializedProto(model)
    except (RuntimeError, OSError) as e:
        raise UserError(f"{name} is not a SentencePiece model ({str(e).splitlines()[0]}); give a .model file") from None
    for token, i in ((UNK, proc.unk_id()), (BOS, proc.bos_id()), (EOS, proc.eos_id()), (PAD, proc.pad_id())):
        if (i < 0 and token != PAD) or (i >= 0 and proc.IdToPiece(i) != token):
            how = "disables it" if i < 0 else f"calls it {proc.IdToPiece(i)!r}"
            raise UserError(
                f"{name} has no {token} (the model {how}): qkvmt needs {', '.join(SPECIALS)} as control pieces; "
                f"train it with {token} as that piece, or give another tokenizer"
            )
    vocab = {proc.IdToPiece(i): i for i in range(proc.GetPieceSize())}
    if PAD not in vocab:
        vocab[PAD] = len(vocab)
        log.info(
            "%s has no %s: it is added after its %d pieces, as Marian and fairseq add it",
            name,
            PAD,
            len(vocab) - 1,
        )
    return vocab


def marian_layout(source: bytes, target: bytes, vocab: dict, target_vocab: dict | None = None) -> dict[str, bytes]:
    """The files, by name, of Marian's tokenizer: a SentencePiece model per side, their ids, and the
    configuration that transformers' MarianTokenizer (and qkvmt.hf.tokenizers) reads."""
    config = {
        "tokenizer_class": "MarianTokenizer",
        "separate_vocabs": target_vocab is not None,
        "eos_token": EOS,
        "unk_token": UNK,
        "pad_token": PAD,
    }
    files = {"source.spm": source, "target.spm": target, "vocab.json": _json(vocab)}
    files["tokenizer_config.json"] = _json(config)
    if target_vocab is not None:
        files["target_vocab.json"] = _json(target_vocab)
    return files


def _json(value: dict) -> bytes:
    return json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8")
