"""SentencePiece with a numbering of its own (a vocab.json), behind the methods qkvmt calls on a
`tokenizers.Tokenizer` (encode_batch, decode_batch, decode, id_to_token, token_to_id, get_vocab,
get_vocab_size), so every command and view takes it as it takes a model's own: the tokenizer of Marian's
folders (qkvmt.hf.marian) and M2M100's (qkvmt.hf.m2m100) alike. Ids mean what MarianTokenizer's and
M2M100Tokenizer's mean; tests/hf/test_tokenizers.py compares them.
"""

from dataclasses import dataclass
from pathlib import Path

from qkvmt.errors import UserError, optional_import
from qkvmt.hf.json_files import read_json, typed

SPIECE_UNDERLINE = "▁"


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
