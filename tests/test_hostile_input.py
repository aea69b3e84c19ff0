"""Hostile input (reliability): the whole configuration is checked before anything
is written, stale state is refused, outputs are complete or absent (Ctrl-C included), and cuts
or nonsense settings are said out loud. Each case runs once, through the script users run, in this
Python (tests.commandline.run_script); Ctrl-C reaches a process of its own."""

import json
import logging
import os
import re
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest

from qkvmt.analysis.forced import forced_attention
from qkvmt.cli.main import main
from qkvmt.decoding.lines import translate_lines
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError, report_user_errors
from qkvmt.loading import load_model
from qkvmt.pipeline.align import record_best
from qkvmt.pipeline.inference_setup import StagedOutput, check_output_dir
from tests.commandline import run_script, user_error
from tests.conftest import ROOT, training_fixture, write_corpus
from tests.test_bad_input import SMALL, train_args


@pytest.fixture
def ckpt(trained_run):
    return trained_run["run"] / "checkpoints" / "last.ckpt"


# ------------------------------------------------------------------ nothing written before the check


def test_a_refused_run_leaves_no_folder_and_a_refused_rerun_keeps_the_runs_files(tmp_path, capsys, monkeypatch):
    """Hydra makes the run folder, .hydra/ and train.log, before our code starts: a refused run
    removes that folder of its own, and never an existing run's (qkvmt train in this process)."""
    corpus = write_corpus(tmp_path / "corpus", sizes=SMALL, gz=False)
    monkeypatch.setattr(sys, "argv", ["qkvmt"])
    for run, before in ((tmp_path / "new", None), (tmp_path / "old", {"checkpoints/step1.ckpt", "train.log"})):
        for name in before or ():
            (run / name).parent.mkdir(parents=True, exist_ok=True)
            (run / name).write_text("an earlier run's")
        with pytest.raises(SystemExit) as stop:
            main(["train", *train_args(corpus, run, "model.d_model=7")])
        assert stop.value.code == 2 and "model.d_model=7 is not divisible" in capsys.readouterr().err
        if before is None:
            assert not run.exists()
        else:
            assert before <= {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "override, named",
    [
        ("model.d_model=7", "model.d_model=7 is not divisible by model.n_heads=4"),
        ("model.n_heads=0", "model.n_heads=0: give a positive whole number"),
        ("model.dropout=1.5", "model.dropout=1.5: give a probability in [0, 1)"),
        ("trainer.max_steps=-5", "trainer.max_steps=-5: give a positive whole number, or -1 for no limit"),
        ("data.vocab_size=0", "data.vocab_size=0: give a whole number of at least 5"),
        ("data.max_tokens=0", "data.max_tokens=0: give a whole number of at least 1"),
        (
            "module.loss_chunk_rows=100",
            "module.loss_chunk_rows=100: give a positive multiple of 64 (the loss takes its rows 64 at a time)",
        ),
        (
            "module.linear_row_multiple=-1",
            "module.linear_row_multiple=-1: give a whole number of rows, or 0 for no padding",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_leaves_no_run_folder(override, named, tmp_path):
    corpus = write_corpus(tmp_path / "corpus", sizes=SMALL, gz=False)
    r = run_script("train", *train_args(corpus, tmp_path / "run", override))
    assert user_error(r) == f"error: {named}"
    assert not (tmp_path / "run").exists()


@training_fixture(scope="module")
def small_run(tmp_path_factory):
    """A one-step run with a vocabulary below the alphabet and a batch budget below the longest pair."""
    base = tmp_path_factory.mktemp("small")
    corpus = write_corpus(base / "corpus", sizes=SMALL, gz=False)
    out = base / "run"
    r = run_script("train", *train_args(corpus, out, "data.vocab_size=8", "data.max_tokens=6"))
    assert r.returncode == 0, r.stderr[-3000:]
    return {"corpus": corpus, "out": out, "log": r.stdout + r.stderr}


def test_nonsense_sizes_train_but_say_so(small_run):
    assert (
        "data.vocab_size=8 is below the training text's" in small_run["log"] and "character level" in small_run["log"]
    )
    assert "data.max_tokens=6 is below the longest training pair" in small_run["log"]


def test_a_rerun_with_another_vocabulary_is_refused_and_the_tokenizer_kept(small_run):
    tok = small_run["out"] / "tokenizer.json"
    before = tok.read_bytes()
    files = sorted(p.relative_to(small_run["out"]) for p in small_run["out"].rglob("*"))
    assert any(p.parts[0] == "checkpoints" for p in files)
    assert json.loads((small_run["out"] / "tokenizer.settings.json").read_text())["vocab_size"] == 8
    r = run_script(
        "train", *train_args(small_run["corpus"], small_run["out"], "data.vocab_size=30", "data.max_tokens=6")
    )
    line = user_error(r)
    assert f"{tok} was made with other settings (data.vocab_size=8 there, 30 asked)" in line and "hydra.run.dir" in line
    assert tok.read_bytes() == before
    assert sorted(p.relative_to(small_run["out"]) for p in small_run["out"].rglob("*")) == files  # all kept


def test_a_rerun_on_other_text_is_refused(small_run, tmp_path):
    other = write_corpus(tmp_path / "other", sizes=SMALL, gz=False, seed=7)
    r = run_script("train", *train_args(other, small_run["out"], "data.vocab_size=8", "data.max_tokens=6"))
    assert "different training text" in user_error(r)


def test_resuming_from_a_checkpoint_of_another_size_names_the_setting(ckpt, tmp_path):
    corpus = write_corpus(tmp_path / "corpus", sizes=SMALL, gz=False)
    r = run_script("train", *train_args(corpus, tmp_path / "run", f"resume={ckpt}", "model.d_model=128"))
    line = user_error(r)
    assert f"resume={ckpt} holds a model with model.d_model=64 but this run asks for model.d_model=128" in line
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ outputs


@pytest.mark.parametrize("what", ["file", "folder with files", "parent is a file"])
@pytest.mark.parametrize("script", ["evaluate", "align", "inspect_attention"])
def test_an_output_dir_that_cannot_take_the_outputs_is_refused_before_work(script, what, ckpt, tmp_path):
    target = tmp_path / "out"
    if what == "file":
        target.write_text("keep me")
    elif what == "folder with files":
        target.mkdir()
        (target / "old.txt").write_text("keep me")
    else:
        target.write_text("keep me")
        target = target / "sub"
    given = {"evaluate": ["split=val"], "align": ["sentence=w1 w2"], "inspect_attention": ["sentence=w1 w2"]}[script]
    r = run_script(script, f"ckpt_path={ckpt}", *given, f"output_dir={target}")
    assert user_error(r).startswith(f"error: output_dir={target}")
    assert "keep me" in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())


def test_average_refuses_an_existing_output_and_a_checkpoint_given_twice(ckpt, tmp_path):
    existing = tmp_path / "avg.ckpt"
    existing.write_text("keep me")
    r = run_script("average", f"average=['{ckpt}','{ckpt}']", f"output={tmp_path / 'new.ckpt'}")
    assert "more than once" in user_error(r) and not (tmp_path / "new.ckpt").exists()
    r = run_script("average", f"average=['{ckpt}','{ckpt}']", f"output={existing}")
    assert user_error(r).startswith(f"error: output={existing} exists") and existing.read_text() == "keep me"


def test_a_folder_given_as_a_file_is_named_as_a_folder(ckpt, tmp_path):
    (tmp_path / "x.de").write_text("w1\n")
    r = run_script(
        "evaluate",
        f"ckpt_path={ckpt}",
        f"src_file={tmp_path / 'x.de'}",
        f"ref_file={tmp_path}",
        f"output_dir={tmp_path / 'out'}",
    )
    assert user_error(r) == f"error: {tmp_path} is a folder: give the path of a text file (plain or .gz) in it"


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_staged_outputs_are_complete_or_absent(interrupt, tmp_path):
    cfg = SimpleNamespace(output_dir=str(tmp_path / "out"))
    staged = StagedOutput(cfg, [tmp_path / "run" / "checkpoints" / "x.ckpt"], "align", "alignments")
    with pytest.raises(interrupt):
        with staged as out:
            (out / "a.json").write_text("{}")
            raise interrupt()
    assert list(tmp_path.iterdir()) == []  # neither the output nor its staging folder
    with staged as out:
        (out / "a.json").write_text("{}")
    assert staged.final == tmp_path / "out" and [p.name for p in tmp_path.iterdir()] == ["out"]
    umask = os.umask(0)
    os.umask(umask)
    assert staged.final.stat().st_mode & 0o777 == 0o777 & ~umask  # as a plain mkdir would make it


def test_an_empty_output_dir_is_refused_and_one_the_command_line_reads_as_a_number_is_a_path(tmp_path, monkeypatch):
    empty = r"^output_dir is empty: give a folder for the outputs, or leave output_dir out for a new one$"
    with pytest.raises(UserError, match=empty):
        check_output_dir(SimpleNamespace(output_dir=""))
    monkeypatch.chdir(tmp_path)
    cfg = SimpleNamespace(output_dir=5)  # output_dir=5: Hydra gives an int
    check_output_dir(cfg)
    staged = StagedOutput(cfg, [tmp_path / "run" / "checkpoints" / "x.ckpt"], "align", "alignments")
    with staged as out:
        (out / "a.json").write_text("{}")
    assert (tmp_path / "5" / "a.json").is_file()


def test_ctrl_c_is_one_line_and_exit_130(capsys):
    @report_user_errors
    def main():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 130 and capsys.readouterr().err == "error: interrupted (Ctrl-C)\n"


def test_sigint_to_translate_stops_it_with_one_line(ckpt):
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    # SIGINT at its default in the child, as in a terminal: a test run started as a background job
    # of a non-interactive shell ignores SIGINT, and Python then keeps ignoring it.
    proc = subprocess.Popen(
        [sys.executable, "scripts/translate.py", f"ckpt_path={ckpt}", "batch_lines=1"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    proc.stdin.write("w1 w2\n")
    proc.stdin.flush()
    first = proc.stdout.readline()  # translated: the script is past loading and waits for more input
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert first.strip() and proc.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "error: interrupted (Ctrl-C)"


# ------------------------------------------------------------------ recorded results, cuts, text


def test_a_partial_gold_set_never_replaces_a_full_result(tmp_path, caplog):
    path = tmp_path / "aer_x.json"
    full = {"gold": {"dir": "/gold", "scored": 508}, "best": "full"}
    record_best(path, full, tmp_path / "copy.json")
    with caplog.at_level(logging.WARNING):
        record_best(path, {"gold": {"dir": "/subset", "scored": 3}, "best": "partial"}, tmp_path / "copy2.json")
    assert json.loads(path.read_text())["best"] == "full" and "copy2.json" in caplog.text
    record_best(path, {"gold": {"dir": "/gold", "scored": 508}, "best": "again"}, tmp_path / "copy3.json")
    assert json.loads(path.read_text())["best"] == "again"


def test_a_reference_longer_than_the_model_is_aligned_with_a_warning(ckpt, caplog):
    model, tok, _ = load_model(ckpt)
    long = " ".join(f"t{i % 40}" for i in range(300))
    with caplog.at_level(logging.WARNING):
        sa = forced_attention(model, tok, "w1 w2", long)
    assert (
        re.search(r"the target has \d{3,} subwords, more than the model's max_positions=256", caplog.text)
        and len(sa.out_tokens) == model.cfg.max_positions
    )


def test_blank_lines_translate_to_empty_lines(ckpt):
    model, tok, _ = load_model(ckpt)
    cfg = DecodeConfig(beam_size=1)
    out = translate_lines(model, tok, ["w1 w2", "   ", "w3 w4", "\t", ""], cfg)
    assert out[1] == out[3] == out[4] == ""
    assert [out[0], out[2]] == translate_lines(model, tok, ["w1 w2", "w3 w4"], cfg)  # the others as without them
