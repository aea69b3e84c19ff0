"""A Hugging Face folder's tokenizer files behind the methods qkvmt calls on a `tokenizers.Tokenizer`
(encode_batch, decode_batch, decode, id_to_token, token_to_id, get_vocab, get_vocab_size), so every
command and view takes it as it takes a model's own.

Marian (OPUS-MT) keeps a SentencePiece model per side, source.spm and target.spm, and ids in vocab.json
(target_vocab.json too where the target vocabulary is its own): a piece's id is its place in vocab.json,
not in the SentencePiece model. Sources are cut with source.spm; text given as a target (a forced pass)
with target.spm, through `target`. A folder with a tokenizer.json opens with the `tokenizers` library.
M2M100 keeps one SentencePiece model, sentencepiece.bpe.model, its ids in vocab.json, and a token per
language after them (qkvmt.hf.languages). Ids mean what MarianTokenizer's and M2M100Tokenizer's mean;
tests/hf/test_tokenizers.py compares them.
"""

from dataclasses import dataclass
from pathlib import Path

from qkvmt.errors import UserError, optional_import
from qkvmt.hf.json_files import read_json, typed
from qkvmt.model.checkpoint import brief

SPIECE_UNDERLINE = "▁"
MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
M2M100_FILES = ("sentencepiece.bpe.model", "vocab.json")


@dataclass(frozen=True)
class Encoding:
    """What `encode_batch` gives per text, as `tokenizers.Encoding` does: its ids."""

    ids: list[int]


def sentencepiece(path: Path):
    spm = optional_import("sentencepiece", "pip install sentencepiece (or pip install -e '.[hf]' in qkvmt's folder)")
    model = spm.SentencePieceProcessor()
    try:
        model.Load(str(path))
    except Exception as e:  # OSError or RuntimeError, with SentencePiece's own text
        raise UserError(
            f"{path} is not a SentencePiece model ({type(e).__name__}); give the folder's own file"
        ) from None
    return model


def read_vocabulary(path: Path) -> dict[str, int]:
    """A vocab.json: tokens and their ids, each id a whole number, 0 or more."""
    vocab = read_json(path)
    for token, i in vocab.items():
        typed(path, token, i, int, "each token an id, a whole number from 0", lambda v: v >= 0)
    if "<unk>" not in vocab:
        raise UserError(f"{path} has no <unk>: it is not a Marian or M2M100 vocabulary")
    return vocab


class PieceVocabulary:
    """SentencePiece with its own numbering: `spm` cuts text into pieces and `vocab` numbers them
    (id_to_token reads it too); one side of a Marian tokenizer, or M2M100's. Decoding reads the target's
    ids: `out_vocab` names them and `out_spm` joins their pieces (MarianTokenizer joins with the source
    model when the vocabulary is shared). `added`: tokens numbered after the vocabulary (M2M100's
    languages), special like `specials`: never cut from text, dropped when decoding skips specials. `files`:
    where `vocab` and `out_vocab` were read."""

    encode_special_tokens = True  # set by qkvmt.text.tokenizer.encode; SentencePiece reads typed "</s>" as text

    def __init__(
        self,
        spm,
        vocab: dict[str, int],
        out_vocab: dict[str, int],
        out_spm,
        specials: tuple[str, ...],
        added: dict[str, int] | None = None,
        files: tuple[Path, Path] = (Path("vocab.json"), Path("vocab.json")),
    ):
        added = added or {}
        self.files = files  # the vocabularies' own files (vocab, out_vocab), which errors name
        self.spm, self.vocab, self.out_spm = spm, vocab | added, out_spm
        self.names = {i: t for t, i in self.vocab.items()}
        self.out_names = {i: t for t, i in (out_vocab | added).items()}
        self.unk = vocab["<unk>"]
        self.out_specials = {out_vocab[t] for t in specials if t in out_vocab} | set(added.values())
        self.target: PieceVocabulary = self  # the side that cuts target text (Marian's is another)

    def _pieces(self, text: str) -> list[str]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:  # a target-language code, kept whole
            code, text = [text[: end + 2]], text[end + 2 :]
        return code + self.spm.encode(text, out_type=str)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[Encoding]:
        """Ids without </s> (qkvmt.model.inputs adds it); a piece vocab.json lacks is <unk>, as MarianTokenizer's."""
        return [Encoding([self.vocab.get(p, self.unk) for p in self._pieces(t)]) for t in texts]

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        if skip_special_tokens:  # dropped before the pieces are joined, as MarianTokenizer drops them
            ids = [i for i in ids if i not in self.out_specials]
        out, run = "", []
        for i in ids:
            token = self.out_names.get(i) or self.out_spm.IdToPiece(i)
            if i in self.out_specials:  # never through SentencePiece: kept as written
                out += self.out_spm.decode_pieces(run) + token + " "
                run = []
            else:
                run.append(token)
        out += self.out_spm.decode_pieces(run)
        return out.replace(SPIECE_UNDERLINE, " ").strip()

    def decode_batch(self, ids: list[list[int]], skip_special_tokens: bool = True) -> list[str]:
        return [self.decode(row, skip_special_tokens) for row in ids]

    def id_to_token(self, i: int) -> str | None:
        return self.names.get(i)

    def token_to_id(self, token: str) -> int | None:
        return self.vocab.get(token)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return dict(self.vocab)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return len(self.vocab)


def marian_tokenizer(folder: Path, config: dict) -> PieceVocabulary:
    """The source side of a Marian folder's tokenizer, its `target` the other side."""
    source, target = sentencepiece(folder / "source.spm"), sentencepiece(folder / "target.spm")
    specials = tuple(
        config.get(k, d) for k, d in (("eos_token", "</s>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"))
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


def load_tokenizer(folder) -> object:
    """The tokenizer of a Hugging Face folder: Marian's SentencePiece pair, or a tokenizer.json; a UserError
    naming the files it needs when the folder has neither."""
    folder = Path(folder)
    config_path = folder / "tokenizer_config.json"
    config = read_json(config_path) if config_path.is_file() else {}
    if all((folder / n).is_file() for n in MARIAN_FILES):
        return marian_tokenizer(folder, config)
    if all((folder / n).is_file() for n in M2M100_FILES):
        from qkvmt.hf.languages import m2m100_tokenizer

        return m2m100_tokenizer(folder, config)
    if (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        from qkvmt.hf.languages import tokenizer_json_languages

        try:
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as e:  # the tokenizers library raises a bare Exception for a malformed file
            raise UserError(f"{folder / 'tokenizer.json'} is not a tokenizer ({brief(e)})") from None
        return tokenizer_json_languages(tokenizer, folder, config)
    raise UserError(
        f"{folder} has no tokenizer files: it needs Marian's {', '.join(MARIAN_FILES)}, M2M100's "
        f"{', '.join(M2M100_FILES)} or a tokenizer.json"
    )
