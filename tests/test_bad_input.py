"""Bad input through the real entry points: a non-zero exit, one `error: ...` line naming the
file or value, no traceback, and no half-written output. Every case runs once, through the script
where users meet it, in this Python (tests.commandline.run_script: a fresh one costs seconds of
imports); where the fresh process is the subject (what it imports), in a process of its own."""

import ast
import html
import os
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from qkvmt.errors import UserError, report_user_errors
from qkvmt.text.tokenizer import encode
from tests.commandline import run_script, start_script, user_error
from tests.conftest import ROOT, tiny_overrides, training_fixture, write_corpus

SMALL = {"train": 60, "val": 4, "test_2016_flickr": 4}


def train_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    """A one-step tiny training run into `out`, never downloading."""
    overrides = [o for o in tiny_overrides(corpus, out, steps=1, val_every=1) if not o.startswith("paths.output_dir")]
    return [
        *overrides,
        "data.source.download_url=null",
        "module.test_decode.beam_size=1",
        f"hydra.run.dir={out}",
        *extra,
    ]


@pytest.fixture
def ckpt(trained_run) -> Path:
    return trained_run["run"] / "checkpoints" / "last.ckpt"


# ------------------------------------------------------------------ data files


@pytest.mark.parametrize("script", ["train", "evaluate"])
def test_missing_data_is_one_line_naming_it(script, ckpt, tmp_path):
    missing = tmp_path / "missing"
    if script == "train":
        r = run_script("train", *train_args(missing, tmp_path / "run"))
        assert "data.root" in user_error(r) and str(missing) in user_error(r)
        assert not missing.exists() and not (tmp_path / "run" / "checkpoints").exists()
    else:
        r = run_script(
            "evaluate",
            f"ckpt_path={ckpt}",
            f"src_file={missing}.de",
            f"ref_file={missing}.en",
            f"output_dir={tmp_path / 'out'}",
        )
        assert user_error(r) == f"error: file not found: {missing}.de; check the path"
        assert not (tmp_path / "out").exists()


def test_parallel_files_of_different_length_name_both_counts(ckpt, tmp_path):
    (tmp_path / "x.de").write_text("w1\nw2\nw3\n")
    (tmp_path / "x.en").write_text("t1\nt2\n")
    r = run_script(
        "evaluate",
        f"ckpt_path={ckpt}",
        f"src_file={tmp_path / 'x.de'}",
        f"ref_file={tmp_path / 'x.en'}",
        f"output_dir={tmp_path / 'out'}",
    )
    line = user_error(r)
    assert f"{tmp_path / 'x.de'} has 3 lines" in line and f"{tmp_path / 'x.en'} has 2" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"src_file": "nope.de", "tgt_file": "x.en"}, "file not found: {tmp}/nope.de; check the path"),
        (
            {"src_file": "x.de", "tgt_file": "short.en"},
            "src_file={tmp}/x.de has 3 lines but tgt_file={tmp}/short.en has 2: they must be line-parallel",
        ),
        ({"src_file": "x.de"}, "src_file= needs tgt_file=: give both src_file=<path> and tgt_file=<path>"),
        ({"tgt_file": "x.en"}, "tgt_file= needs src_file=: give both src_file=<path> and tgt_file=<path>"),
        (
            {"src_file": "x.de", "tgt_file": "x.en", "sentence": "w1"},
            "src_file= and tgt_file= align a corpus, and sentence= aligns one sentence: drop sentence=",
        ),
        (
            {"src_file": "x.de", "tgt_file": "x.en", "gold_dir": "gold"},
            "and gold_dir= scores every head against gold links: drop gold_dir= to align the files",
        ),
        ({"src_file": "x.de", "tgt_file": "bad.en"}, "{tmp}/bad.en, line 2: not valid UTF-8"),
    ],
)
def test_a_corpus_that_cannot_be_aligned_is_one_line_before_any_output(given, expected, tmp_path):
    # The files are checked before the model loads: the bundled one serves, and nothing trains.
    (tmp_path / "x.de").write_text("w1\nw2\nw3\n")
    (tmp_path / "x.en").write_text("t1\nt2\nt3\n")
    (tmp_path / "short.en").write_text("t1\nt2\n")
    (tmp_path / "bad.en").write_bytes(b"t1\nt2 \xff\nt3\n")
    args = [f"{k}={tmp_path / v}" if k != "sentence" else f"{k}={v}" for k, v in given.items()]
    r = run_script("align", "ckpt_path=multi30k-de-en", *args, f"output_dir={tmp_path / 'out'}")
    assert expected.format(tmp=tmp_path) in user_error(r)
    assert r.stdout == "" and not (tmp_path / "out").exists()


@training_fixture(scope="module")
def dropping_run(tmp_path_factory):
    """One training run whose corpus has 3 pairs with an empty side and many longer than
    model.max_positions=8; returns the run folder, its log and the corpus."""
    base = tmp_path_factory.mktemp("dropping")
    corpus = write_corpus(base / "corpus", sizes=SMALL, gz=False)
    for lang, extra in (("de", ["", "w1 w2", "  "]), ("en", ["t1", "", ""])):
        path = corpus / f"train.{lang}"
        path.write_text("".join(line + "\n" for line in extra) + path.read_text())
    out = base / "run"
    r = run_script("train", *train_args(corpus, out, "model.max_positions=8"))
    assert r.returncode == 0, r.stderr[-3000:]
    return {"out": out, "log": r.stdout + r.stderr, "corpus": corpus}


def test_empty_training_pairs_are_skipped_and_counted(dropping_run):
    n = SMALL["train"] + 3
    assert f"skipped 3 training pairs with an empty side (of {n})" in dropping_run["log"]


def test_training_pairs_longer_than_max_positions_are_filtered_and_counted(dropping_run):
    corpus, tok = dropping_run["corpus"], Tokenizer.from_file(str(dropping_run["out"] / "tokenizer.json"))
    src, tgt = ((corpus / f"train.{lang}").read_text().splitlines() for lang in ("de", "en"))
    pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    lengths = [
        max(len(a), len(b)) + 1 for a, b in zip(encode(tok, [s for s, _ in pairs]), encode(tok, [t for _, t in pairs]))
    ]
    too_long = sum(n > 8 for n in lengths)
    assert 0 < too_long < len(pairs)
    assert f"filtered {too_long} training pairs longer than max_positions=8 tokens" in dropping_run["log"]


@pytest.mark.slow(reason="starts scripts/train.py in a fresh Python, importing torch and Lightning")
def test_a_training_corpus_of_empty_lines_is_one_line(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", sizes=SMALL, gz=False)
    for lang in ("de", "en"):
        (corpus / f"train.{lang}").write_text("\n \n\n")
    r = run_script("train", *train_args(corpus, tmp_path / "run"))
    message = user_error(r)
    assert "'train'" in message and str(corpus) in message and "no pair with text on both sides" in message


@pytest.mark.parametrize("where", ["corpus", "src_file", "stdin", "sentence"])
def test_bytes_that_are_not_utf8_name_the_file_and_line(where, ckpt, tmp_path):
    bad = b"w1 w2 \xff\xfe"
    if where == "corpus":
        corpus = write_corpus(tmp_path / "corpus", sizes=SMALL, gz=False)
        lines = (corpus / "train.de").read_bytes().split(b"\n")
        (corpus / "train.de").write_bytes(b"\n".join([lines[0], bad, *lines[2:]]))
        r = run_script("train", *train_args(corpus, tmp_path / "run"))
        assert user_error(r).startswith(f"error: {corpus / 'train.de'}, line 2: not valid UTF-8")
    elif where == "src_file":
        (tmp_path / "x.de").write_bytes(b"w1\n" + bad + b"\n")
        (tmp_path / "x.en").write_text("t1\nt2\n")
        r = run_script(
            "evaluate",
            f"ckpt_path={ckpt}",
            f"src_file={tmp_path / 'x.de'}",
            f"ref_file={tmp_path / 'x.en'}",
            f"output_dir={tmp_path / 'out'}",
        )
        assert user_error(r).startswith(f"error: {tmp_path / 'x.de'}, line 2: not valid UTF-8")
        assert not (tmp_path / "out").exists()
    elif where == "stdin":
        r = run_script("translate", f"ckpt_path={ckpt}", stdin=b"w1\n" + bad + b"\nw3\n")
        assert user_error(r).startswith("error: stdin, line 2: not valid UTF-8")
        assert r.stdout == ""  # the failing line's chunk is never half translated
    else:
        r = run_script("translate", f"ckpt_path={ckpt}", b"sentence=" + bad)
        assert user_error(r).startswith("error: sentence is not valid UTF-8")


def test_a_sentence_longer_than_the_model_is_still_translated_with_a_warning(ckpt):
    long = " ".join(f"w{i % 40}" for i in range(300))  # over the tiny model's 256 positions
    r = run_script("translate", f"ckpt_path={ckpt}", "decode.beam_size=1", stdin=f"w1 w2\n{long}\nw3\n".encode())
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.split("\n")
    assert len(out) == 4 and out[-1] == ""  # one translation per input line, the long one included
    assert "1 sentence(s) longer than max_positions=256 tokens are cut to fit (first: line 2)" in r.stderr


@pytest.mark.parametrize("script", ["translate", "align", "inspect_attention"])
def test_an_empty_sentence_is_one_line(script, ckpt, tmp_path):
    out = [] if script == "translate" else [f"output_dir={tmp_path / 'out'}"]
    r = run_script(script, f"ckpt_path={ckpt}", "sentence=", *out)
    assert user_error(r) == 'error: sentence is empty: give the text, e.g. sentence="Ein Mann fährt Fahrrad ."'
    assert r.stdout == "" and not (tmp_path / "out").exists()


# ------------------------------------------------------------------ checkpoints


def test_a_checkpoint_that_does_not_exist_is_one_line(tmp_path):
    r = run_script("evaluate", f"ckpt_path={tmp_path / 'nope.ckpt'}", f"output_dir={tmp_path / 'out'}")
    assert user_error(r).startswith(
        f"error: checkpoint not found: {tmp_path / 'nope.ckpt'}; set ckpt_path to a .ckpt file, "
        "a model folder or a bundled model's name"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "script, args", [("evaluate", []), ("translate", ["sentence=w1"]), ("export", ["format=onnx"])]
)
def test_a_command_that_reads_a_checkpoint_says_what_is_wrong_before_importing_lightning(script, args, tmp_path):
    # Lightning takes seconds to import; only placing a loaded model needs it. What a fresh Python
    # imports is seen only in one: this test keeps its process.
    r = start_script(script, f"ckpt_path={tmp_path / 'nope.ckpt'}", *args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert user_error(r).startswith("error: checkpoint not found" if script != "export" else "error: format='onnx'")
    imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported and "lightning" not in imported


@pytest.mark.parametrize("damage", ["first_half", "random_bytes"])
def test_a_truncated_or_corrupt_checkpoint_is_one_line(damage, ckpt, tmp_path):
    data = ckpt.read_bytes()
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(data[: len(data) // 2] if damage == "first_half" else os.urandom(len(data) // 4))
    r = run_script("translate", f"ckpt_path={bad}", "sentence=w1")
    assert user_error(r).startswith(f"error: {bad} is not a readable checkpoint (truncated or corrupt?)")
    assert r.stdout == ""


def test_a_checkpoint_whose_config_does_not_fit_its_weights_names_the_weight(ckpt, tmp_path):
    raw = torch.load(ckpt, map_location="cpu", weights_only=True)
    d_model = raw["qkvmt"]["model_config"]["d_model"]
    raw["qkvmt"]["model_config"]["d_model"] = d_model // 2
    torch.save(raw, tmp_path / "edited.ckpt")
    line = user_error(run_script("translate", f"ckpt_path={tmp_path / 'edited.ckpt'}", "sentence=w1"))
    assert line.startswith(f"error: {tmp_path / 'edited.ckpt'}: the weights do not fit the model configuration")
    assert f", {d_model}), but the stored configuration needs (" in line and "size mismatch" not in line


class RunsCode:
    """Unpickling this runs a shell command that leaves a marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("script", ["evaluate", "translate"])
def test_a_checkpoint_that_would_run_code_is_refused(script, ckpt, tmp_path):
    raw = torch.load(ckpt, map_location="cpu", weights_only=True)
    marker = tmp_path / "pwned"
    raw["qkvmt"]["src_lang"] = RunsCode(marker)
    torch.save(raw, tmp_path / "evil.ckpt")
    given = ["sentence=w1"] if script == "translate" else ["split=val", f"output_dir={tmp_path / 'out'}"]
    r = run_script(script, f"ckpt_path={tmp_path / 'evil.ckpt'}", *given)
    line = user_error(r)
    assert line.startswith(f"error: {tmp_path / 'evil.ckpt'} holds code or objects that are not plain data; refusing")
    assert "system" in line and not marker.exists() and not (tmp_path / "out").exists()


# ------------------------------------------------------------------ settings and gold files


@pytest.mark.parametrize(
    "script, typo, wrong, near",
    [("train", "modle.d_model=3", "modle", "model"), ("translate", "decode.beam=3", "decode.beam", "beam_size")],
)
def test_a_mistyped_setting_is_one_line_naming_the_settings_there(script, typo, wrong, near, ckpt, tmp_path):
    """The first part of the key that does not exist is named, with the settings beside it."""
    args = [f"hydra.run.dir={tmp_path / 'run'}"] if script == "train" else [f"ckpt_path={ckpt}", "sentence=w1"]
    r = run_script(script, *args, typo)
    assert r.returncode == 2 and r.stdout == ""
    line = user_error(r)
    assert line.startswith(f"error: {wrong}: no such setting")
    assert near in line.split(" are ", 1)[1].split(" (")[0].split(", ")  # the settings where the typo is
    assert not (tmp_path / "run").exists()


def write_gold(folder: Path, talp: list[str]) -> Path:
    folder.mkdir()
    (folder / "de").write_text("w1 w2 w3\nw4 w5\n")
    (folder / "en").write_text("t3 t2 t1\nt5 t4\n")
    (folder / "alignment.talp").write_text("".join(line + "\n" for line in talp))
    return folder


@pytest.mark.parametrize(
    "talp, expected",
    [
        (["1-3 2-2 3-1"], "files have different line counts (de: 2, en: 2, alignment.talp: 1)"),
        (["1-3 2-2 3-1", "1-2 2-7"], "alignment.talp, line 2: link 2-7 (1-based) is out of range"),
    ],
)
def test_gold_alignments_that_do_not_fit_the_sentences_name_file_and_line(talp, expected, ckpt, tmp_path):
    gold = write_gold(tmp_path / "gold", talp)
    r = run_script("align", f"ckpt_path={ckpt}", f"gold_dir={gold}", f"output_dir={tmp_path / 'out'}")
    line = user_error(r)
    assert str(gold) in line and expected in line
    assert not (tmp_path / "out").exists()


def test_a_multi_line_user_error_is_printed_as_one_line(capsys):
    @report_user_errors
    def fails():
        raise RuntimeError("wrapped") from UserError("cannot load x:\n  first reason\n\n  second reason")

    with pytest.raises(SystemExit) as e:
        fails()
    assert e.value.code == 2
    assert capsys.readouterr().err == "error: cannot load x: first reason second reason\n"


# ------------------------------------------------------------------ outputs and code


def test_inspect_page_shows_a_hostile_sentence_only_as_text(ckpt, tmp_path):
    sentence = """w1 <script>alert(1)</script> "w2" 'w3' & w4"""
    r = run_script("inspect_attention", f"ckpt_path={ckpt}", f"sentence={sentence}", f"output_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    page = (tmp_path / "inspect.html").read_text(encoding="utf-8")
    assert html.escape(sentence, quote=True) in page and "<script>alert" not in page
    assert page.count("<script") == 2  # the template's data block and code, nothing injected


def shell_calls(source: str) -> list[str]:
    """Calls that hand a string to a shell: os.system/os.popen, subprocess's getoutput, shell=True."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in ("os.system", "os.popen", "system", "popen", "subprocess.getoutput", "subprocess.getstatusoutput"):
            found.append(name)
        for kw in node.keywords:
            if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                found.append(f"{name}(shell=...)")
    return found


def test_no_code_in_src_or_scripts_runs_a_shell():
    assert shell_calls("import os, subprocess\nos.system('x')\nsubprocess.run('x', shell=True)") == [
        "os.system",
        "subprocess.run(shell=...)",
    ]  # the check itself sees both forms
    files = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    assert len(files) > 20
    offenders = {
        str(f.relative_to(ROOT)): calls for f in files if (calls := shell_calls(f.read_text(encoding="utf-8")))
    }
    assert offenders == {}
