"""Writing outputs so that nothing is half-written: a temporary file in the same folder,
flushed to disk, then renamed over the target (an atomic step on POSIX filesystems)."""

import hashlib
import json
import logging
import os
import shutil
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path

from qkvmt.errors import UserError, user_error_of


def atomic_write(path: Path, write) -> None:
    """Call `write(f)` on a binary temporary file, fsync it, rename it to `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_json(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def sha256(path: Path) -> str:
    """The digest of a file's bytes; of a folder (a model folder, a bundled model), of each of its
    files' relative name and bytes, in name order."""
    path = Path(path)
    h = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        if file != path:
            h.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def hash_lines(h, lines: list[str]) -> None:
    """Feed text lines into hash `h` in pieces (never a copy of the whole text), then a separator."""
    for i in range(0, len(lines), 50_000):
        feed_lines(h, lines[i : i + 50_000])
    h.update(b"\0")


def feed_lines(h, lines: list[str]) -> None:
    """Feed some text lines into hash `h`, each ended by a newline: fed piece by piece, a text's
    lines give the digest they give at once (hashlib's digests do not depend on the pieces)."""
    h.update("".join(line + "\n" for line in lines).encode())


def check_new_output(path: Path, setting: str, folder: bool) -> None:
    """Refuse, before any work, an output that cannot be written or that would overwrite or mix
    with earlier results: a file where a folder is wanted (or the reverse), an existing file, a
    folder that already holds files, a parent that is a file, or a place where nothing can be written."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UserError(f"{setting}={path} is an existing file: give a folder for the outputs")
    if folder and path.is_dir() and any(path.iterdir()):
        raise UserError(
            f"{setting}={path} already holds files: "
            "give a new or empty folder (results are never mixed with older ones)"
        )
    if not folder and path.is_dir():
        raise UserError(f"{setting}={path} is a folder: give the path of the file to write")
    if not folder and path.exists():
        raise UserError(f"{setting}={path} exists: give a new file name (an existing file is never overwritten)")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"{setting}={path}: {parent} is a file, not a folder")
    check_writable(path, f"{setting}={path}", "give a path where you can write")


def check_writable(path: Path, what: str, remedy: str) -> None:
    """Refuse, before any work, a path under which nothing can be made: its nearest existing folder
    must take a new folder. Tried for real, since permission bits do not tell (root passes
    os.access everywhere, yet cannot write in /proc or on a read-only filesystem); `what` names the
    path in the message and `remedy` says what to do."""
    parent = next((p for p in Path(path).parents if p.exists()), None)
    if parent is None:  # the root folder itself: nothing above it to stage in
        return
    try:
        Path(tempfile.mkdtemp(prefix=".qkvmt-probe-", dir=parent)).rmdir()
    except OSError as e:
        raise UserError(f"{what}: cannot make a folder in {parent} ({e.strerror or e}); {remedy}") from None


class StagedFolder:
    """A folder that appears whole or not at all: files are written into a hidden folder in
    `parent` and moved into place only if the block ends without an error (or Ctrl-C).

        with StagedFolder(parent, "align", final=lambda: parent / "align_1") as tmp:
            write_json(tmp / "alignment.json", data)

    `final` is asked for only at the end, so a caller can reserve a fresh name then; an empty
    folder already at that name is replaced, never one with files. A block that fails also
    removes the folders above it that it made (outputs/benchmark/), where they are still empty."""

    def __init__(self, parent: Path, name: str, final):
        self.parent, self.name, self.final_of = Path(parent), name, final
        self.final: Path | None = None

    def __enter__(self) -> Path:
        self.made = [p for p in (self.parent, *self.parent.parents) if not p.exists()]  # nearest first
        try:
            self.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.name}.partial-", dir=self.parent))
        except OSError as e:  # a read-only place, or one the folder's owner keeps: the user's to change
            raise UserError(
                f"cannot write the outputs in {self.parent} ({e.strerror or e}): give an output folder you can write to"
            ) from None
        umask = os.umask(0)
        os.umask(umask)
        self.tmp.chmod(0o777 & ~umask)  # mkdtemp's 0700 would outlive the rename
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            for parent in self.made:
                with suppress(OSError):  # not empty: another run wrote there meanwhile
                    parent.rmdir()
            return False
        final = Path(self.final_of())
        try:
            if final.is_dir() and not removed(final):  # a mount point (docker -v): the files move into it
                for item in self.tmp.iterdir():
                    shutil.move(item, final / item.name)  # another filesystem, maybe: copied then
                self.tmp.rmdir()
            else:
                self.tmp.rename(final)
        except OSError as e:
            where = f"cannot move the outputs into {final} ({e.strerror or e})"
            raise UserError(f"{where}: they are in {self.tmp}") from None
        self.final = final
        return False


def removed(folder: Path) -> bool:
    """Whether the empty `folder` could be removed (not a mount point, nor kept by its parent's owner)."""
    try:
        folder.rmdir()
    except OSError:
        return False
    return True


@contextmanager
def removed_if_refused(folder: Path, record: str, log: str):
    """A run folder that a UserError leaves as Hydra made it, holding only the `record` folder and
    the `log` file that Hydra writes before the run starts (.hydra/, train.log), is removed, so a
    refused run leaves no folder. Only a folder this run made: it held the record, an empty log
    and nothing else when the block began. An existing run's folder and files are never touched,
    and the working folder itself (hydra.run.dir=.) loses only what Hydra wrote into it."""
    folder = Path(folder)

    def only_hydras(empty_log: bool) -> bool:
        names = {p.name for p in folder.iterdir()} if (folder / record).is_dir() else {None}
        logged = (folder / log).is_file() and (folder / log).stat().st_size > 0
        return names <= {record, log} and not (empty_log and logged)

    made_by_this_run = only_hydras(empty_log=True)
    parents = sole_parents(folder)
    try:
        yield
    except Exception as e:
        if user_error_of(e) is not None and made_by_this_run and only_hydras(empty_log=False):
            shutil.rmtree(folder / record, ignore_errors=True)
            detach_file_handlers(folder / log)
            (folder / log).unlink(missing_ok=True)
            if folder.resolve() != Path.cwd().resolve():
                folder.rmdir()
                for parent in parents:  # outputs/<experiment>/, made for this run, if still empty
                    if not any(parent.iterdir()):
                        parent.rmdir()
        raise


def detach_file_handlers(path: Path) -> None:
    """Close the logging handlers that write to `path` and take them off their loggers: a handler left
    on a removed file would reopen it at the next record, in a folder that is gone (a command run again
    in the same process, as a library or a test runs it)."""
    target = os.path.abspath(path)
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        for handler in list(getattr(logger, "handlers", [])):
            if isinstance(handler, logging.FileHandler) and handler.baseFilename == target:
                handler.close()
                logger.removeHandler(handler)


def sole_parents(folder: Path) -> list[Path]:
    """The folders above `folder` and below the working folder that hold nothing but the way down
    to it, nearest first: made for it, as Hydra makes outputs/<experiment>/ for outputs/<experiment>/<time>/."""
    cwd, child, out = Path.cwd().resolve(), Path(folder).resolve(), []
    for parent in child.parents:
        if parent == cwd or cwd not in parent.parents or [p.name for p in parent.iterdir()] != [child.name]:
            break
        out.append(parent)
        child = parent
    return out
