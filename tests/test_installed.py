"""qkvmt as users install it: the wheel in a fresh virtual environment (QKVMT_INSTALLED, its bin/;
.ci/run builds it), its `qkvmt` run from a folder outside the clone with nothing of the clone on
the path. Every command writes under the folder it runs in, never into the installed package."""

import json
import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.commandline import server_process
from tests.conftest import ROOT, tiny_overrides, write_corpus

INSTALLED = os.environ.get("QKVMT_INSTALLED")
pytestmark = pytest.mark.skipif(
    not INSTALLED, reason="set QKVMT_INSTALLED to a venv's bin with the wheel installed (.ci/run does)"
)
SENTENCE = "Ein Mann fährt mit dem Fahrrad ."


def environment() -> dict:
    """This process's environment as a user's shell with the venv activated has it: nothing that
    points into the clone or moves the outputs elsewhere."""
    drop = {"PYTHONPATH", "QKVMT_ROOT", "HYDRA_FULL_ERROR", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"PATH": f"{INSTALLED}{os.pathsep}{env.get('PATH', '')}"}


@pytest.fixture(scope="module")
def package() -> Path:
    """The installed package's folder, where the venv's Python finds it: not the clone's."""
    r = subprocess.run(
        [Path(INSTALLED) / "python", "-c", "import importlib.util; print(importlib.util.find_spec('qkvmt').origin)"],
        cwd="/",
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    folder = Path(r.stdout.strip()).parent
    assert folder.name == "qkvmt" and "site-packages" in folder.parts and ROOT not in folder.parents
    return folder


def listing(folder: Path) -> dict:
    """Every file and folder of the package with its size and modification time; Python's own
    bytecode caches left out (pip compiles them, but an install with --no-compile has none yet)."""
    return {
        str(p.relative_to(folder)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if "__pycache__" not in p.parts
    }


def qkvmt(*args: str, cwd: Path, package: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """The installed `qkvmt ARGS`, from `cwd`; it must leave the installed package as it was."""
    before = listing(package)
    r = subprocess.run(
        [Path(INSTALLED) / "qkvmt", *args], cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout
    )
    assert listing(package) == before, f"qkvmt {' '.join(args)} wrote into {package}"
    return r


def test_help_lists_the_subcommands(tmp_path, package):
    from qkvmt.cli.main import usage
    from qkvmt.cli.table import COMMANDS

    r = qkvmt("--help", cwd=tmp_path, package=package)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.strip() == usage()
    assert all(f"qkvmt {c.name} {c.example}" in r.stdout for c in COMMANDS.values())
    r = qkvmt("translate", "--help", cwd=tmp_path, package=package)  # the packaged Hydra config, composed
    assert r.returncode == 0 and "ckpt_path" in r.stdout, r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_translate_matches_the_api_and_writes_nothing(tmp_path, package):
    import qkvmt as api

    r = qkvmt("translate", "ckpt_path=multi30k-de-en", f"sentence={SENTENCE}", cwd=tmp_path, package=package)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == api.load("multi30k-de-en", device="cpu").translate([SENTENCE])[0]
    assert list(tmp_path.iterdir()) == []


def test_explore_serves_the_explorer_of_the_bundled_model(tmp_path, package):
    before = listing(package)
    argv = [Path(INSTALLED) / "qkvmt", "explore", "host=127.0.0.1", "port=0"]  # 0: any free port
    with server_process(argv, tmp_path, environment()) as (proc, line, stderr):
        match = re.search(r"at (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops it\)", line)
        assert match, f"{line!r}; stderr: {stderr()}"
        url = match.group(1)
        html = urllib.request.urlopen(url, timeout=60).read().decode()
        data = json.loads(re.search(r'id="data">(.*?)</script>', html, re.S).group(1))
        assert data["page"] == "explorer" and "the bundled model multi30k-de-en" in html
        ask = urllib.request.Request(
            url + "api/sentence",
            data=json.dumps({"source": SENTENCE}).encode(),
            headers={"Content-Type": "application/json", "Origin": url.rstrip("/")},
        )
        answer = json.loads(urllib.request.urlopen(ask, timeout=120).read())
        assert answer["source"] == SENTENCE and answer["translation"].strip()
    # a served page ends only by Ctrl-C: one line and the shell's code for it, no traceback
    assert proc.returncode == 130 and stderr().strip().endswith("error: interrupted (Ctrl-C)"), stderr()
    assert listing(package) == before
    assert list(tmp_path.iterdir()) == []


def tiny_training(corpus: Path, out: Path, steps: int, val_every: int) -> list[str]:
    """tests/conftest.py's tiny settings, with the output and cache folders left to their defaults
    (outputs/ and data/cache/ where the command runs)."""
    moved = ("paths.output_dir=", "data.cache_dir=")
    return [o for o in tiny_overrides(corpus, out, steps, val_every) if not o.startswith(moved)]


def only_run_under(outputs: Path) -> Path:
    [run] = [p for p in outputs.glob("multi30k_de_en/*") if p.is_dir()]
    return run


@pytest.mark.slow
def test_train_then_evaluate_its_checkpoint_under_the_working_folder(tmp_path, package):
    corpus = write_corpus(tmp_path / "corpus")
    r = qkvmt("train", *tiny_training(corpus, tmp_path, steps=8, val_every=4), cwd=tmp_path, package=package)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "data", "outputs"]
    assert any((tmp_path / "data" / "cache").iterdir())  # the tokenizer and encoded corpus
    run = only_run_under(tmp_path / "outputs")
    ckpt = run / "checkpoints" / "last.ckpt"
    assert ckpt.is_file() and json.loads((run / "train_metrics.json").read_text())

    # a run on plain files reads its split from data.root (conf/references.yaml), given again
    evaluate = [f"ckpt_path={ckpt.relative_to(tmp_path)}", f"data.root={corpus}"]
    r = qkvmt("evaluate", *evaluate, cwd=tmp_path, package=package)
    assert r.returncode == 0, r.stderr[-3000:]
    [metrics] = (run / "evaluations").glob("*/metrics.json")
    scores = json.loads(metrics.read_text())
    assert scores["n"] == 24 and 0 <= scores["bleu"] <= 100 and r.stdout.startswith("bleu")


@pytest.mark.slow
def test_two_process_ddp_through_the_installed_command(tmp_path, package):
    """Lightning starts the second process as [python, <venv>/bin/qkvmt, train, ...]: the console
    script, not `python -m`."""
    corpus = write_corpus(tmp_path / "corpus")
    ddp = ["trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp"]
    r = qkvmt("train", *tiny_training(corpus, tmp_path, 4, 2), *ddp, cwd=tmp_path, package=package, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    log = r.stdout + r.stderr
    assert "MEMBER: 2/2" in log and "distributed_backend=gloo" in log, log[-3000:]  # two processes, gloo
    run = only_run_under(tmp_path / "outputs")
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "data", "outputs"]
