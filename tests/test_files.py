"""files.py: a refused run's own folder is removed, and nothing else ever is; an output where nothing can
be written is refused before any work."""

import os
from pathlib import Path

import pytest

from qkvmt.errors import UserError
from qkvmt.files import StagedFolder, check_new_output, removed_if_refused


def hydras_record(folder, log: str = ""):
    """A folder as Hydra leaves it before the run starts: .hydra/ and the job's log."""
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (folder / "train.log").write_text(log)
    return folder


def refused(folder, fault=UserError("refused"), during=lambda: None):
    with pytest.raises(type(fault)):
        with removed_if_refused(folder, ".hydra", "train.log"):
            during()
            raise fault


def test_a_refused_run_removes_the_folder_hydra_made_for_it(tmp_path):
    run = hydras_record(tmp_path / "run")
    refused(run, during=lambda: (run / "train.log").write_text("[INFO] run folder: ...\n"))  # its own log lines
    assert not run.exists() and tmp_path.exists()


def test_an_existing_runs_folder_and_files_are_kept(tmp_path):
    with_checkpoints = hydras_record(tmp_path / "a")
    (with_checkpoints / "checkpoints").mkdir()
    (with_checkpoints / "checkpoints" / "last.ckpt").write_bytes(b"weights")
    earlier_log = hydras_record(tmp_path / "b", log="[INFO] an earlier run's lines\n")
    for run in (with_checkpoints, earlier_log):
        before = sorted(p.relative_to(run) for p in run.rglob("*"))
        refused(run)
        assert sorted(p.relative_to(run) for p in run.rglob("*")) == before


def test_a_run_that_wrote_or_failed_otherwise_keeps_its_folder(tmp_path):
    wrote = hydras_record(tmp_path / "wrote")
    refused(wrote, during=lambda: (wrote / "tokenizer.json").write_text("{}"))  # a later error, after it wrote
    assert (wrote / "tokenizer.json").is_file()
    crashed = hydras_record(tmp_path / "crashed")
    refused(crashed, fault=RuntimeError("a fault, not a refusal: its log is kept"))
    assert (crashed / "train.log").is_file()


def test_the_working_folder_loses_only_what_hydra_wrote_and_a_folder_without_hydras_record_nothing(
    tmp_path, monkeypatch
):
    here = hydras_record(tmp_path / "here")
    monkeypatch.chdir(here)  # hydra.run.dir=.
    refused(here)
    assert here.is_dir() and list(here.iterdir()) == []
    empty = tmp_path / "empty"  # no .hydra/: not a folder Hydra made for a run
    empty.mkdir()
    refused(empty)
    assert empty.is_dir()


def test_a_refusal_hydra_wrapped_is_a_refusal(tmp_path):
    """A UserError raised while Hydra builds a configured object reaches the run in Hydra's own exception."""
    from hydra.errors import InstantiationException

    run = hydras_record(tmp_path / "run")
    wrapped = InstantiationException("Error in call to target ...")
    wrapped.__cause__ = UserError("data.vocab_size=0: give a whole number of at least 5")
    refused(run, fault=wrapped)
    assert not run.exists()


def test_the_empty_folders_made_above_a_refused_run_go_too_and_no_others(tmp_path, monkeypatch):
    """outputs/<experiment>/<time>/: the folders Hydra made down to the run go with it, up to the working
    folder; one that holds anything else, or the working folder, stays."""
    monkeypatch.chdir(tmp_path)
    run = hydras_record(tmp_path / "outputs" / "multi30k_de_en_cpu" / "12-00-00")
    refused(run)
    assert list(tmp_path.iterdir()) == []
    run = hydras_record(tmp_path / "outputs" / "multi30k_de_en_cpu" / "12-00-01")
    (tmp_path / "outputs" / "an earlier run").mkdir()
    refused(run)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["an earlier run", "outputs"]


# ------------------------------------------------------------------ outputs where nothing can be written

UNWRITABLE = Path("/proc/qkvmt_out")  # the kernel's own folder: no one, root included, makes folders in it
needs_proc = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")


@needs_proc
@pytest.mark.parametrize("folder", [True, False])
def test_an_output_where_nothing_can_be_made_is_refused_naming_it(folder):
    for path in (UNWRITABLE, UNWRITABLE / "deeper" / "out"):  # the nearest existing folder is the one tried
        with pytest.raises(UserError, match=f"^output_dir={path}: cannot make a folder in /proc "):
            check_new_output(path, "output_dir", folder=folder)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a folder whatever its permissions")
def test_a_folder_the_user_cannot_write_in_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(UserError, match=f"output_dir={locked / 'out'}: cannot make a folder in {locked}"):
            check_new_output(locked / "out", "output_dir", folder=True)
    finally:
        locked.chmod(0o700)


def test_a_writable_output_is_accepted_and_the_trial_leaves_nothing(tmp_path):
    check_new_output(tmp_path / "new" / "out", "output_dir", folder=True)
    assert list(tmp_path.iterdir()) == []


@needs_proc
def test_a_staged_folder_that_cannot_be_made_is_a_user_error():
    with pytest.raises(UserError, match=f"cannot write the outputs in {UNWRITABLE}"):
        with StagedFolder(UNWRITABLE, "evaluate", final=lambda: UNWRITABLE / "out"):
            pytest.fail("the block ran")


def test_an_empty_folder_that_cannot_be_removed_takes_the_outputs_in_and_loses_none(tmp_path, monkeypatch):
    """A mount point (docker -v host:/out) cannot be removed for the staged folder to take its name:
    the files move into it instead."""
    out = tmp_path / "out"
    out.mkdir()
    rmdir = Path.rmdir

    def busy(self):
        if self == out:
            raise OSError(16, "Device or resource busy")
        rmdir(self)

    monkeypatch.setattr(Path, "rmdir", busy)
    with StagedFolder(tmp_path, "out", final=lambda: out) as staged:
        (staged / "benchmark.json").write_text("{}")
        (staged / "sub").mkdir()
        (staged / "sub" / "a.txt").write_text("a")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "out",
        "out/benchmark.json",
        "out/sub",
        "out/sub/a.txt",
    ]
