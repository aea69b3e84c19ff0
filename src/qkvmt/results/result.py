"""What every result of the Python API shares: it shows itself in a notebook with the page its
command writes, and saves itself as the files its command writes.

A result names its files and how to write each (`files()`); `save(folder)` writes them all,
`save("x.json")` (or .html, .png, ...) only the one of that kind. A folder appears only when
complete: its files are written into a hidden folder beside it and moved into place.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.files import StagedFolder
from qkvmt.results.html import notebook_frame


class Result(ABC):
    @classmethod
    def of(cls, computed):
        """This view of `computed`, the analysis's own dataclass that the view's class extends."""
        return cls(**{f.name: getattr(computed, f.name) for f in fields(computed)})

    @abstractmethod
    def html(self) -> str:
        """The whole page, as the command writes it."""

    @abstractmethod
    def files(self) -> dict[str, Callable[[Path], None]]:
        """{file name: a function that writes it to the given path}."""

    def _repr_html_(self) -> str:
        return notebook_frame(self.html())

    def save(self, path) -> Path:
        """Write every file into the new (or empty) folder `path`, or only the file whose
        suffix `path` has; returns `path`."""
        path, files = Path(path), self.files()
        if path.suffix:
            same = [write for name, write in files.items() if Path(name).suffix == path.suffix]
            if len(same) != 1:
                kinds = sorted({Path(n).suffix for n in files})
                raise UserError(
                    f"cannot save a {type(self).__name__} as {path}: give a folder for all of "
                    f"{', '.join(files)}, or a file ending in one of {', '.join(kinds)}"
                    + (f" ({path.suffix} is {len(same)} files)" if same else "")
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            same[0](path)
            return path
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise UserError(
                f"{path} {'already holds files' if path.is_dir() else 'is a file'}: give a new or empty folder"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        with StagedFolder(path.parent, path.name, final=lambda: path) as tmp:
            for name, write in files.items():
                write(tmp / name)
        return path


def timed(result: dict) -> str:
    """How long a study of result["n"] sentences took, in all and by phase, as its command prints it."""
    phases = ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items())
    return f"{result['n']} sentences in {result['wall_s']:.0f} s ({phases})"
