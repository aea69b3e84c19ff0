"""data.tokenizer: the vocabulary a training run makes from its training pairs (conf/data/tokenizer/).

Each choice is a class with one method, `make`, which gives the run's tokenizer and keeps it in the run
folder with a record of what it is, so a rerun in the folder with another choice (or other settings) is
refused before it writes:

- JointBPE (joint_bpe, the default): one BPE over both languages with HF `tokenizers`, the run's
  tokenizer.json, as every run before the setting made it;
- SentencePiece (sentencepiece): one SentencePiece model over both languages, unigram or BPE;
- SeparateBPE (separate_bpe): two SentencePiece BPE models, one per language, as OPUS-MT keeps them;
- TokenizerFile (file): an existing `tokenizers` JSON or SentencePiece .model.

The SentencePiece ones are kept in Marian's file layout (qkvmt.text.pieces) in the run's tokenizer/ folder
and in every checkpoint, as an imported model's tokenizer is (qkvmt.hf.tokenizer_files).
"""

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.errors import UserError
from qkvmt.hf.tokenizer_files import kept_files, open_files
from qkvmt.text.pieces import MODEL_TYPES, marian_layout, piece_vocab, train_pieces
from qkvmt.text.tokenizer import SPECIALS, Specials, kept_json, load_or_train, target_side

log = logging.getLogger(__name__)
MIN_FREQUENCY = 2  # data.min_frequency's default, which only JointBPE reads


@dataclass(frozen=True)
class TrainingText:
    """What a vocabulary is made of: the training pairs' sides, read when a vocabulary is trained (at most
    data.tokenizer_sample pairs), the data settings that size it, and a digest of the text (with the language
    pair) for the record."""

    sample: Callable[[], tuple[list[str], list[str]]]  # (source sides, target sides)
    src_first: bool  # the languages in a fixed order: a pair's joint vocabulary is the same both ways
    vocab_size: int
    min_frequency: int
    digest: str

    def joint(self) -> list[str]:
        src, tgt = self.sample()
        return src + tgt if self.src_first else tgt + src

    def record(self, tokenizer: str) -> dict:
        """The settings record of a vocabulary trained on this text."""
        return {"tokenizer": tokenizer, "vocab_size": self.vocab_size, "data": self.digest}


@dataclass(frozen=True)
class Made:
    """A run's tokenizer, and its files where it is a set of them (Marian's layout); None: a `tokenizers` JSON."""

    tokenizer: object
    files: dict[str, bytes] | None = None


class JointBPE:
    """One BPE over both languages (qkvmt.text.tokenizer.train_bpe), kept as the run's tokenizer.json."""

    name = "joint_bpe"  # its choice in conf/data/tokenizer/
    separate = False
    counts = True  # reads data.min_frequency (the others keep no minimum count)

    def __init__(self, **given):
        no_other_settings(self.name, given)

    def make(self, text: TrainingText, path: Path) -> Made:
        tok = load_or_train(path, text.joint, text.vocab_size, text.min_frequency, data=text.digest)
        if tok.get_vocab_size() > text.vocab_size:
            log.warning(
                "data.vocab_size=%d is below the training text's %d distinct characters: the tokenizer is character "
                "level, with %d tokens; a subword model needs a larger data.vocab_size (thousands)",
                text.vocab_size,
                tok.get_vocab_size() - len(SPECIALS),
                tok.get_vocab_size(),
            )
        return Made(tok)


def pieces_tokenizer(path: Path, settings: dict, make) -> Made:
    """SentencePiece files kept in the run's tokenizer/ folder (beside where a JSON would be), and the tokenizer
    they make."""
    files = kept_files(path.with_suffix(""), settings, make)
    return Made(open_files(files), files)


def no_other_settings(choice: str, given: dict, settings: tuple[str, ...] = ()) -> None:
    """A data.tokenizer.<key> the choice does not read (`+data.tokenizer.path=` beside joint_bpe) is
    refused by name, where Python's TypeError would leave Hydra's multi-line error."""
    if given:
        has = ", ".join(f"data.tokenizer.{k}" for k in settings) or "none"
        raise UserError(
            f"data.tokenizer.{sorted(given)[0]} is no setting of data.tokenizer={choice} (its settings: {has}); "
            "choose with data.tokenizer=joint_bpe, sentencepiece, separate_bpe or file"
        )


def check_min_frequency(vocabulary, min_frequency: int) -> None:
    """A data.min_frequency other than its default is refused where the vocabulary keeps no minimum count."""
    if min_frequency != MIN_FREQUENCY and not getattr(vocabulary, "counts", False):
        raise UserError(
            f"data.min_frequency={min_frequency} applies to data.tokenizer=joint_bpe only, not {vocabulary.name}: "
            "leave data.min_frequency out"
        )


class SentencePiece:
    """One SentencePiece model over both languages: model_type unigram (OPUS-MT's) or bpe."""

    name = "sentencepiece"  # its choice in conf/data/tokenizer/
    separate = False

    def __init__(self, model_type: str = "unigram", **given):
        no_other_settings(self.name, given, ("model_type",))
        if model_type not in MODEL_TYPES:
            raise UserError(f"data.tokenizer.model_type={model_type!r}: use one of {', '.join(MODEL_TYPES)}")
        self.model_type = model_type

    def make(self, text: TrainingText, path: Path) -> Made:
        def train() -> dict[str, bytes]:
            model = train_pieces(text.joint(), text.vocab_size, self.model_type)
            return marian_layout(model, model, piece_vocab(model, "the trained SentencePiece model"))

        return pieces_tokenizer(path, text.record("sentencepiece") | {"model_type": self.model_type}, train)


class SeparateBPE:
    """A vocabulary per language: two SentencePiece BPE models, one per language, as OPUS-MT keeps them;
    data.vocab_size pieces each."""

    name = "separate_bpe"  # its choice in conf/data/tokenizer/
    separate = True

    def __init__(self, **given):
        no_other_settings(self.name, given)

    def make(self, text: TrainingText, path: Path) -> Made:
        def train() -> dict[str, bytes]:
            source, target = (train_pieces(side, text.vocab_size, "bpe") for side in text.sample())
            vocabs = [
                piece_vocab(m, f"the trained {side} SentencePiece model")
                for m, side in ((source, "source"), (target, "target"))
            ]
            return marian_layout(source, target, *vocabs)

        return pieces_tokenizer(path, text.record("separate_bpe"), train)


class TokenizerFile:
    """An existing tokenizer, used for both languages: a `tokenizers` JSON (path ending .json) holding qkvmt's
    four control tokens, or a SentencePiece model (.model). Its contents are the record's, so a rerun with a
    changed file is refused."""

    name = "file"  # its choice in conf/data/tokenizer/
    separate = False

    def __init__(self, path: str, **given):
        no_other_settings(self.name, given, ("path",))
        self.path = Path(path).expanduser()

    def make(self, text: TrainingText, path: Path) -> Made:
        where = f"data.tokenizer.path={self.path}"
        if self.path.is_dir():
            raise UserError(f"{where} is a folder: give the tokenizer file in it (a .json or a .model)")
        if self.path.suffix not in (".json", ".model"):
            raise UserError(f"{where}: give a tokenizers JSON (.json) or a SentencePiece model (.model)")
        try:
            data = self.path.read_bytes()
        except OSError as e:
            why = e.strerror or type(e).__name__
            raise UserError(f"{where} cannot be read ({why}): give a readable file") from None
        settings = {"tokenizer": "file", "file": hashlib.sha256(data).hexdigest()[:20]}
        if self.path.suffix == ".model":
            vocab = piece_vocab(data, where)  # checked before anything is kept
            return pieces_tokenizer(path, settings, lambda: marian_layout(data, data, vocab))
        tok = json_tokenizer(data, where)
        return Made(kept_json(path, settings, lambda: tok))


def json_tokenizer(data: bytes, where: str) -> Tokenizer:
    """A `tokenizers` JSON's tokenizer; a UserError naming the first control token it lacks."""
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception for a malformed definition
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{where} is not a tokenizers JSON ({first}): give a tokenizer.json file") from None
    for token in SPECIALS:
        if tok.token_to_id(token) is None:
            raise UserError(
                f"{where} has no {token}: qkvmt needs {', '.join(SPECIALS)} in its vocabulary; add it, or give "
                "another tokenizer"
            )
    return tok


def model_sizes(tokenizer, vocabulary) -> dict:
    """The model settings a run's vocabulary decides: its size and special ids, and with a vocabulary
    per language (`vocabulary.separate`) the target's own size and untied embeddings."""
    sizes = {"vocab_size": tokenizer.get_vocab_size(), **Specials.of(tokenizer).config_fields(), **untied(vocabulary)}
    if vocabulary.separate:  # the decoder's and the output's rows are the target vocabulary's
        sizes["tgt_vocab_size"] = target_side(tokenizer).get_vocab_size()
    return sizes


def untied(vocabulary) -> dict:
    """Separate source and target vocabularies have no one embedding to share: model.tie_embeddings=false, as
    a recipe's model config sets it true."""
    return {"tie_embeddings": False} if vocabulary.separate else {}
