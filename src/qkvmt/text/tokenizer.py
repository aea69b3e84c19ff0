"""One joint BPE vocabulary for source and target, trained with HF `tokenizers`.

Metaspace pre-tokenization marks each word start with "▁" and keeps punctuation as its own
pre-token, so decoding is lossless (cased, detokenized text comes straight back) and every
subword knows whether it starts a word, which alignment needs.
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from qkvmt.errors import UserError
from qkvmt.files import write_json

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = [PAD, BOS, EOS, UNK]  # ids 0..3, matching ModelConfig's pad/bos/eos ids
WORD_START = "▁"


@dataclass(frozen=True)
class Specials:
    """The ids of the control tokens, the one shape every part of qkvmt takes them in."""

    pad: int
    bos: int
    eos: int

    @classmethod
    def of(cls, tok: Tokenizer) -> "Specials":
        return cls(pad=tok.token_to_id(PAD), bos=tok.token_to_id(BOS), eos=tok.token_to_id(EOS))

    def config_fields(self) -> dict:
        """As ModelConfig (and so every checkpoint) stores them: pad_id, bos_id, eos_id."""
        return {"pad_id": self.pad, "bos_id": self.bos, "eos_id": self.eos}


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(replacement=WORD_START), pre_tokenizers.Punctuation()]
    )
    tok.decoder = decoders.Metaspace(replacement=WORD_START)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIALS, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_or_train(
    path: Path, texts_fn, vocab_size: int, min_frequency: int = 2, data: str = "", given: Tokenizer | None = None
) -> Tokenizer:
    """Reuse the tokenizer saved with a run (on resume it must not change); train it otherwise,
    or, for a run that starts from another model's weights, take that model's (`given`).

    The settings that made it (vocab_size, min_frequency, `data`: a digest of the text it was
    trained on; or a digest of the given tokenizer) are kept beside it in <name>.settings.json;
    a run that asks for other settings is refused, so a rerun in the same folder never silently
    trains with a tokenizer it did not ask for."""
    if given is None:
        settings = {"vocab_size": vocab_size, "min_frequency": min_frequency, "data": data}
        return kept_json(path, settings, lambda: train_bpe(texts_fn(), vocab_size, min_frequency))
    return kept_json(path, {"init_from": hashlib.sha256(given.to_str().encode()).hexdigest()[:20]}, lambda: given)


def kept_json(path: Path, settings: dict, make) -> Tokenizer:
    """The run's tokenizer JSON at `path` if it has one made with `settings` (a UserError if with others);
    else `make()`'s, saved there with its record."""
    path = Path(path)
    record = path.with_name(path.stem + ".settings.json")
    if path.exists():
        check_settings(path, record, settings)
        return Tokenizer.from_file(str(path))
    check_settings(record, record, settings)  # a record without this file: another kind's tokenizer beside it
    tok = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(record, settings)  # first: a tokenizer never exists without its record
    tmp = path.with_suffix(".tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return tok


# What a settings record holds, as the settings that change it are named; a record without "tokenizer" is
# the joint BPE's (every record from before data.tokenizer)
RECORDED = {
    "vocab_size": "data.vocab_size",
    "min_frequency": "data.min_frequency",
    "model_type": "data.tokenizer.model_type",
    "file": "the contents of data.tokenizer.path",
}


def check_settings(path: Path, record: Path, wanted: dict) -> None:
    if not record.exists():
        return  # a run from before records were kept: nothing to compare against
    found = json.loads(record.read_text(encoding="utf-8"))
    if found.get("init_from") != wanted.get("init_from"):  # a model's tokenizer on one side at least
        there = "another model's (init_from)" if "init_from" in found else "one trained on that run's data"
        asked = "init_from's" if "init_from" in wanted else "one trained on its data"
        what = f"the tokenizer there is {there}, this run asks for {asked}"
    elif found.get("tokenizer") != wanted.get("tokenizer"):
        kind = lambda r: r.get("tokenizer", "joint_bpe")  # noqa: E731
        what = f"data.tokenizer={kind(found)} there, {kind(wanted)} asked"
    else:
        differ = [k for k in (*RECORDED, "data") if found.get(k) != wanted.get(k)]
        if not differ:
            return
        what = "; ".join(
            "different training text (data.root, data.src_lang/tgt_lang, data.extra_train or the files changed)"
            if k == "data"
            else f"{RECORDED[k]} changed"
            if k == "file"
            else f"{RECORDED[k]}={found.get(k)} there, {wanted.get(k)} asked"
            for k in differ
        )
    raise UserError(
        f"{path} was made with other settings ({what}): give this run its own folder (hydra.run.dir=...), "
        f"or delete {path} to train a new tokenizer (which also means starting the run afresh)"
    )


def encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    """Subword ids of user text, the one way text becomes ids (training, translation, attention).

    Whitespace runs count as one space and the ends are stripped: Metaspace would otherwise
    make a "▁" token of every extra space, and a line of spaces would not be empty. A typed
    "<s>", "</s>" or "<pad>" is text, encoded piece by piece, never a control token.
    """
    tok.encode_special_tokens = True  # not saved with the tokenizer: set before every use
    if getattr(tok, "padding", None) or getattr(tok, "truncation", None):
        # a tokenizer.json saved after a padded or cut call keeps those settings (transformers saves it so);
        # transformers pads and cuts only when a call asks, and sources are padded and cut in qkvmt.model.inputs
        tok.no_padding()
        tok.no_truncation()
    return [e.ids for e in tok.encode_batch([" ".join(t.split()) for t in texts], add_special_tokens=False)]


def target_side(tok: Tokenizer) -> Tokenizer:
    """The tokenizer of target text and ids: the tokenizer's target side where it has one of its own (a
    Marian SentencePiece pair or a many-to-many model's, qkvmt.hf), else the one joint tokenizer."""
    return getattr(tok, "target", tok)


def encode_target(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    """Subword ids of target text: `encode` with the tokenizer's target side."""
    return encode(target_side(tok), texts)


def decode(tok: Tokenizer, ids: list[list[int]]) -> list[str]:
    return tok.decode_batch(ids, skip_special_tokens=True)
