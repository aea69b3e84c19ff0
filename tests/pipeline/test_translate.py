"""Translating stdin or one sentence; the shared translate_lines path."""

import io

import pytest

from qkvmt.decoding.lines import translate_lines
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.loading import load_model
from qkvmt.pipeline.translate import translate
from tests.commandline import run_python, run_script, user_error
from tests.conftest import compose_inference

LINES = ["w1 w2 w3", "", "w7 w8 w9 w10 w11 w12", "w4", "", "w5 w6"]


def test_translate_lines_keeps_order_and_empty_lines_and_ignores_batching(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    cfg = DecodeConfig(beam_size=3, max_tokens=8)  # several small batches
    batched = translate_lines(model, tok, LINES, cfg)
    one_by_one = [translate_lines(model, tok, [line], cfg)[0] for line in LINES]
    assert batched == one_by_one
    assert len(batched) == len(LINES) and batched[1] == batched[4] == ""


def test_translate_stdin_round_trips_in_order(trained_run):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    cfg = compose_inference("translate", f"ckpt_path={ckpt}", "batch_lines=2")
    out = io.StringIO()
    assert translate(cfg, stdin=io.StringIO("\n".join(LINES) + "\n"), stdout=out) == {"sentences": len(LINES)}
    model, tok, _ = load_model(ckpt)
    expected = translate_lines(model, tok, LINES, DecodeConfig(beam_size=5))
    assert out.getvalue().split("\n")[:-1] == expected


def test_translate_one_sentence_and_refuse_an_empty_one(trained_run):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    out = io.StringIO()
    translate(compose_inference("translate", f"ckpt_path={ckpt}", "sentence='w1 w2'"), stdout=out)
    assert len(out.getvalue().splitlines()) == 1
    with pytest.raises(UserError, match="empty"):
        translate(compose_inference("translate", f"ckpt_path={ckpt}", "sentence=' '"), stdout=io.StringIO())


def test_translate_script_prints_only_translations_on_stdout(trained_run):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    r = run_script("translate", f"ckpt_path={ckpt}", "decode.beam_size=2", stdin=("\n".join(LINES) + "\n").encode())
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.split("\n")
    assert len(out) == len(LINES) + 1 and out[1] == "" and out[4] == ""


def test_translate_stdin_that_is_not_utf8_names_the_line_after_writing_earlier_chunks(trained_run):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    cfg = compose_inference("translate", f"ckpt_path={ckpt}", "batch_lines=1", "decode.beam_size=1")
    out = io.StringIO()
    with pytest.raises(UserError, match=r"^stdin, line 2: not valid UTF-8 .*; re-encode it as UTF-8$"):
        translate(cfg, stdin=io.BytesIO(b"w1 w2\nw3 \xff\nw4\n"), stdout=out)
    assert len(out.getvalue().splitlines()) == 1  # the chunk before the bad line, complete


def test_translate_checks_the_sentence_before_loading_the_checkpoint(tmp_path):
    cfg = compose_inference("translate", f"ckpt_path={tmp_path / 'nope.ckpt'}", "sentence=' '")
    with pytest.raises(UserError, match="sentence is empty"):  # not "checkpoint not found"
        translate(cfg, stdout=io.StringIO())


def test_a_byte_order_mark_and_invisible_characters_on_stdin_translate_as_without_them(tmp_path):
    """A byte order mark first (as editors on Windows save a file), zero-width characters inside a sentence and
    lines of nothing visible: the translations of the text without them, the invisible lines' empty."""
    clean = ["Ein Mann fährt Fahrrad .", "", "Zwei Hunde spielen im Schnee .", ""]
    hidden = ["\ufeffEin Mann fährt Fahrrad .", "\x00", "Zwei Hun\u200bde spielen\u2060 im Schnee .", "\ufeff\u200d"]
    bundled = ("-m", "qkvmt", "translate", "ckpt_path=multi30k-de-en", "decode.beam_size=2")
    expected = run_python(*bundled, stdin="".join(x + "\n" for x in clean).encode(), cwd=tmp_path)
    r = run_python(*bundled, stdin="".join(x + "\n" for x in hidden).encode(), cwd=tmp_path)
    assert r.returncode == expected.returncode == 0, r.stderr[-2000:]
    assert r.stdout == expected.stdout and len(r.stdout.split("\n")) == len(clean) + 1
    refused = run_python(*bundled, "sentence=\ufeff\u200b", cwd=tmp_path)
    assert user_error(refused).startswith("error: sentence is empty: give the text")
