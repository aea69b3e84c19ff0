"""Where parallel text comes from: plain or gzipped files, or a Hugging Face dataset.

Both sources take the directory the data lives in (`data.root`) and return aligned lists of
source and target sentences for a split; `parallel_lines` and `tsv_lines` stream the pairs of
files a pair at a time (two line-parallel files, or one `source<TAB>target` file).
"""

import contextlib
import gzip
import itertools
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.text.visible import visible_text


def checked_file(path) -> Path:
    """`path` as a Path, if it names a text file; a folder or a missing file is a UserError naming it."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path} is a folder: give the path of a text file (plain or .gz) in it")
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
        raise UserError(f"file not found: {path}{where}; check the path")
    return path


def _opener(path: Path):
    return gzip.open if path.suffix == ".gz" else open


def read_lines(path: Path) -> list[str]:
    """The visible text of each line of a UTF-8 text file, plain or .gz; an undecodable line is an error naming
    file and line."""
    return list(stream_lines(path))


def stream_lines(path: Path) -> Iterator[str]:
    """A text file's lines one at a time, their visible text, never the whole file in memory (read_lines lists
    them)."""
    return (visible_text(line) for line in decoded_lines(path))


def decoded_lines(path: Path) -> Iterator[str]:
    """A text file's lines one at a time as they are, without the newline.
    Split on "\\n" only: str.splitlines would also break at U+2028 and similar inside a sentence."""
    path = checked_file(path)
    try:
        with _opener(path)(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                yield decode_line(raw[:-1] if raw.endswith(b"\n") else raw, path, number)
    except (OSError, EOFError) as e:  # a .gz cut short is found only as it is read
        raise UserError(f"cannot read {path}: {e}") from None


def parallel_lines(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of two line-parallel files, a pair at a time; files of different
    lengths are a UserError naming both, found where the shorter one ends."""
    src, tgt = stream_lines(src_path), stream_lines(tgt_path)
    for number, (s, t) in enumerate(itertools.zip_longest(src, tgt), 1):
        if s is None or t is None:  # one file has ended: count the other's lines left
            longer = number + sum(1 for _ in (src if t is None else tgt))
            lines = (longer, number - 1) if t is None else (number - 1, longer)
            raise UserError(
                f"source and target differ in length: {src_path} has {lines[0]} lines, {tgt_path} has "
                f"{lines[1]}; they must be line-parallel (one sentence per line)"
            )
        yield s, t


def tsv_lines(path: Path) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of a file of `source<TAB>target` lines, a pair at a time; a line
    without exactly one tab is a UserError naming the file and line."""
    for number, line in enumerate(decoded_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            raise UserError(
                f"{path}, line {number}: {len(parts) - 1} tabs, where a line is source<TAB>target; "
                "give one tab a line (a tab inside a sentence cannot be told from the separator)"
            )
        yield visible_text(parts[0]), visible_text(parts[1])


@dataclass(frozen=True)
class LineFile:
    """A text file's lines as a sequence read afresh, a line at a time, each time it is iterated
    (stream_lines); `lines`: how many it has, counted once by whoever checked it."""

    path: Path
    lines: int

    def __iter__(self) -> Iterator[str]:
        return stream_lines(self.path)

    def __len__(self) -> int:
        return self.lines


def required_text(value, name: str) -> str:
    """The visible text of a sentence=/reference= setting; missing, blank or undecodable text is a UserError."""
    example = f'give the text, e.g. {name}="Ein Mann fährt Fahrrad ."'
    if value is None:
        raise UserError(f"no {name} given: {example}")
    text = visible_text(str(value))
    if not text:
        raise UserError(f"{name} is empty: {example}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line arrive as lone surrogates
        raise UserError(f"{name} is not valid UTF-8 text: give it in UTF-8 (check the terminal's encoding)") from None
    return text


def decode_line(raw: bytes, where, number: int) -> str:
    """`raw` as UTF-8 text; otherwise a UserError naming `where` (a file, or stdin) and the line number."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{where}, line {number}: not valid UTF-8 ({e.reason} at byte {e.start}); re-encode it as UTF-8"
        ) from None


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    pairs = list(parallel_lines(src_path, tgt_path))
    return [s for s, _ in pairs], [t for _, t in pairs]


class TextFiles:
    """Files named `{split}.{lang}` or `{split}.{lang}.gz` in `root`: the Multi30k published layout.

    With `download_url`, a missing file is fetched from `{download_url}/{split}.{lang}.gz` first.
    """

    def __init__(self, root: str, download_url: str | None = None):
        self.root = Path(root)
        self.download_url = download_url

    def path(self, split: str, lang: str) -> Path:
        for name in (f"{split}.{lang}.gz", f"{split}.{lang}"):
            if (self.root / name).is_file():
                return self.root / name
        if self.download_url:
            return self.download(f"{split}.{lang}.gz")
        raise UserError(
            f"no {split}.{lang}[.gz] in {self.root}: set data.root to the folder that holds the {split} split"
        )

    def download(self, name: str) -> Path:
        url, target = f"{self.download_url}/{name}", self.root / name
        created = [d for d in (self.root, *self.root.parents) if not d.exists()]  # deepest first
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")  # a broken download never looks complete
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            for d in created:  # a mistyped data.root leaves no empty folders behind
                with contextlib.suppress(OSError):
                    d.rmdir()
            raise UserError(
                f"cannot download {url} ({e}); put {name} into {self.root} by hand, or set data.root"
            ) from None
        tmp.replace(target)
        return target

    def files(self, split: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path]:
        """A split's two line-parallel files, for reading a pair at a time."""
        return self.path(split, src_lang), self.path(split, tgt_lang)

    def read(self, split: str, src_lang: str, tgt_lang: str) -> tuple[list[str], list[str]]:
        return read_parallel(*self.files(split, src_lang, tgt_lang))


class HFDataset:
    """Any Hugging Face dataset with a `translation` column ({lang: text}) or one column per language.

    `path` is a hub name (bentrevett/multi30k, iwslt2017, wmt14) or a local folder of data files;
    downloads are cached under `root`.
    """

    def __init__(self, root: str, path: str, name: str | None = None, revision: str | None = None):
        self.root, self.dataset, self.name, self.revision = root, path, name, revision

    def read(self, split: str, src_lang: str, tgt_lang: str) -> tuple[list[str], list[str]]:
        import datasets  # heavy; only this source needs it

        try:
            ds = datasets.load_dataset(
                self.dataset, self.name, split=split, cache_dir=self.root, revision=self.revision
            )
        except Exception as e:  # datasets raises many types for a missing dataset, split or network
            raise UserError(f"cannot load Hugging Face dataset {self.dataset!r} split {split!r}: {e}") from None
        if "translation" in ds.column_names:
            pairs = ds["translation"]
            missing = {src_lang, tgt_lang} - set(pairs[0] if len(pairs) else ())
            if missing:
                raise UserError(
                    f"{self.dataset}: the translation column has no {sorted(missing)}; check data.src_lang/tgt_lang"
                )
            return [visible_text(p[src_lang]) for p in pairs], [visible_text(p[tgt_lang]) for p in pairs]
        if {src_lang, tgt_lang} <= set(ds.column_names):
            return [visible_text(s) for s in ds[src_lang]], [visible_text(t) for t in ds[tgt_lang]]
        raise UserError(
            f"{self.dataset}: no 'translation' column and no {src_lang!r}/{tgt_lang!r} columns (has {ds.column_names})"
        )
