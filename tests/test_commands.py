"""The `qkvmt` command: every subcommand a pipeline function over the packaged configuration,
scripts/*.py its aliases, and one line for a subcommand or a setting that does not exist.
`python -m qkvmt` runs in this Python (tests.commandline.run_python) where its answer is the
subject and a fresh one would import torch first; in a process of its own where that is cheap (no
subcommand) and for a translation from outside the clone. DDP through the command:
tests/training/test_ddp_faults.py."""

import ast
import fnmatch
import importlib

import pytest

from qkvmt.cli.hydra_main import CONF_DIR
from qkvmt.cli.table import COMMANDS
from tests.commandline import run_python, start_python
from tests.conftest import ROOT


def qkvmt(*args: str, cwd):
    """`python -m qkvmt ARGS` as a user runs it, from `cwd`, in this Python."""
    return run_python("-m", "qkvmt", *args, cwd=cwd)


def start_qkvmt(*args: str, cwd, timeout: int = 300):
    """`python -m qkvmt ARGS` as a user runs it, from `cwd`, in a fresh process."""
    return start_python("-m", "qkvmt", *args, cwd=cwd, timeout=timeout)


def test_alone_it_lists_every_subcommand_with_a_line_and_an_example(tmp_path):
    # Processes of their own here and below: without a subcommand nothing heavy is imported, so a
    # fresh Python costs a tenth of a second, and the real exit status is checked at that price.
    r = start_qkvmt(cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    for c in COMMANDS.values():
        assert f"  {c.name}" in r.stdout and c.summary in r.stdout
        assert f"qkvmt {c.name} {c.example}" in r.stdout
    assert start_qkvmt("--help", cwd=tmp_path).stdout == r.stdout


def test_an_unknown_subcommand_is_one_line_naming_the_subcommands(tmp_path):
    r = start_qkvmt("tarin", "experiment=x", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: qkvmt has no subcommand 'tarin'") and ", ".join(COMMANDS) in line


def test_an_unknown_setting_is_one_line_naming_the_settings_there(tmp_path):
    r = qkvmt("translate", "ckpt_path=multi30k-de-en", "decode.beam_sise=3", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("error: decode.beam_sise: no such setting") and "beam_size" in line
    r = qkvmt("translate", "ckpt_path=multi30k-de-en", "beam=3", cwd=tmp_path)
    assert r.returncode == 2 and "ckpt_path" in r.stderr and "decode" in r.stderr
    r = qkvmt("train", "experiment=multi30k_de_en_cpu", "model=huge", cwd=tmp_path)
    models = sorted(p.stem for p in (ROOT / "conf" / "model").glob("*.yaml"))
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        f"error: model=huge: no such model; use one of {', '.join(models)}"
    )
    assert list(tmp_path.iterdir()) == []  # refused before anything ran


def test_a_subcommand_takes_hydras_flags(tmp_path):
    r = qkvmt("translate", "--cfg", "job", "decode.beam_size=3", cwd=tmp_path)
    assert r.returncode == 0 and "beam_size: 3" in r.stdout
    r = qkvmt("evaluate", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "ckpt_path" in r.stdout


def test_translate_from_a_folder_outside_the_clone_matches_the_api(tmp_path):
    import qkvmt as api

    sentence = "Ein Mann fährt mit dem Fahrrad ."
    r = start_qkvmt("translate", "ckpt_path=multi30k-de-en", f"sentence={sentence}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == api.load("multi30k-de-en", device="cpu").translate([sentence])[0]


def test_every_subcommand_runs_a_pipeline_function_over_a_packaged_config():
    for c in COMMANDS.values():
        module, _, name = c.function.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), c.function
        assert (CONF_DIR / f"{c.config}.yaml").is_file(), c.config


def test_every_script_is_an_alias_of_a_subcommand():
    """scripts/<name>.py, as the docs of earlier versions and users' habits run them, call run(<subcommand>)."""
    aliased = {}
    for path in (ROOT / "scripts").glob("*.py"):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)]
        [name] = [c.args[0].value for c in calls if getattr(c.func, "id", None) == "run"]
        aliased[name] = path.name
    assert sorted(aliased) == sorted(COMMANDS)


def test_the_repositorys_conf_is_the_packaged_configuration_and_the_wheel_holds_all_of_it():
    assert (ROOT / "conf").resolve() == CONF_DIR  # one set of files: the two cannot drift apart
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["qkvmt"]
    files = [p.relative_to(CONF_DIR.parent).as_posix() for p in CONF_DIR.rglob("*") if p.is_file()]
    assert files and all(
        any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/") for pat in patterns) for f in files
    )
