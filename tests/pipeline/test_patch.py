"""qkvmt patch: Model.patch_study over a file of clean sources and one of corrupt ones, written whole as
patch.json, patch.md and patch.png; its settings and files refused in one line before the model loads,
leaving nothing behind; recorded by qkvmt results add=, tabled from the record and drawn by qkvmt figures."""

import json

import pytest

import qkvmt
import qkvmt.studies.patching.result
from qkvmt.errors import UserError
from qkvmt.pipeline.patch import patch
from qkvmt.record import from_study, record_file, tables
from qkvmt.record.study_figures import draw_tracing
from qkvmt.studies.patching.result import heat_table
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference
from tests.record.conftest import RECORD
from tests.studies.patching.test_corpus import CLEAN, CORRUPT


def files(tmp_path, clean=CLEAN, corrupt=CORRUPT):
    a, b = tmp_path / "clean.de", tmp_path / "corrupt.de"
    a.write_text("".join(s + "\n" for s in clean))
    b.write_text("".join(s + "\n" for s in corrupt))
    return [f"clean_file={a}", f"corrupt_file={b}"]


def test_the_command_writes_what_the_model_finds(tmp_path, capsys):
    out = tmp_path / "out"
    settings = ["ckpt_path=multi30k-de-en", *files(tmp_path), f"output_dir={out}", "n=2", "names=[decoder.2.cross.v]"]
    result = patch(compose_inference("patch", *settings))
    assert {p.name for p in out.iterdir()} == {"patch.json", "patch.md", "patch.png"}
    saved = json.loads((out / "patch.json").read_text())
    direct = qkvmt.load("multi30k-de-en", device="cpu").patch_study(CLEAN[:2], CORRUPT[:2], "decoder.2.cross.v")
    assert saved["heat"] == result["heat"] and saved["n"] == 2
    for mine, theirs in zip(saved["pairs"], direct.result["pairs"]):
        assert mine["patching"] == pytest.approx(theirs["patching"], abs=1e-5)
    printed = capsys.readouterr().out
    assert "Most restored: decoder.2.cross.v h" in printed and f"wrote {out}" in printed


def test_nothing_is_left_when_a_file_cannot_be_written(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(qkvmt.studies.patching.result, "heat_map", broken)
    with pytest.raises(OSError, match="disk full"):
        patch(
            compose_inference(
                "patch", "ckpt_path=multi30k-de-en", *files(tmp_path), f"output_dir={tmp_path / 'p' / 'out'}", "n=1"
            )
        )
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["method=guess"], "error: method='guess': use one of patching, attribution"),
        (["batch_size=0"], "error: batch_size=0: give a whole number of at least 1"),
        (["n=-1"], "error: n=-1: give a whole number of at least 1"),
    ],
)
def test_a_bad_setting_is_one_line_before_the_model_loads(tmp_path, overrides, message):
    r = run_script("patch", f"ckpt_path={tmp_path / 'no-such.ckpt'}", *files(tmp_path), *overrides)
    assert user_error(r) == message


def test_missing_or_unpaired_files_are_one_line_and_leave_nothing(tmp_path):
    out = tmp_path / "out"
    r = run_script("patch", "ckpt_path=multi30k-de-en", f"clean_file={tmp_path / 'a.de'}", f"output_dir={out}")
    assert user_error(r) == f"error: file not found: {tmp_path / 'a.de'}; check the path"
    r = run_script("patch", "ckpt_path=multi30k-de-en", files(tmp_path)[0], f"output_dir={out}")
    assert user_error(r) == "error: corrupt_file is not set: give corrupt_file=<a text file, one source a line>"
    r = run_script("patch", "ckpt_path=multi30k-de-en", *files(tmp_path, CLEAN, CORRUPT[:2]), f"output_dir={out}")
    assert "has 3 lines and" in user_error(r) and "2: give a corrupt source for each clean one" in user_error(r)
    r = run_script(
        "patch",
        "ckpt_path=multi30k-de-en",
        *files(tmp_path, ["Ein Mann ."], ["Eine Fraugestalt ."]),
        f"output_dir={out}",
    )
    assert "pair 0: 'Ein Mann .' splits into" in user_error(r) and "unequal=skip" in user_error(r)
    assert not out.exists()


def run(tmp_path, *overrides):
    files = {"clean_file": ("mann.de", CLEAN), "corrupt_file": ("frau.de", CORRUPT)}  # file names the record shows
    for name, lines in files.values():
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    given = [f"{key}={tmp_path / name}" for key, (name, _) in files.items()]
    return patch(compose_inference("patch", "ckpt_path=multi30k-de-en", *given, *overrides))


def test_the_study_is_recorded_tabled_and_drawn(tmp_path):
    out = tmp_path / "out"
    run(tmp_path, f"output_dir={out}", "unequal=skip", "names=[decoder.2.cross.v,encoder.*.resid_post]")
    found = json.loads((out / "patch.json").read_text())
    entry, classes = from_study.entry(out, conditions="a test", taken_ids=())
    assert entry["tracing_of"] == "multi30k-de-en" and entry["id"] == "tracing-multi30k-de-en-1"
    assert entry["command"].endswith(
        "qkvmt patch ckpt_path=multi30k-de-en clean_file=mann.de corrupt_file=frau.de "
        "'names=[decoder.2.cross.v,encoder.*.resid_post]' unequal=skip"
    )
    assert entry["what"].startswith("causal tracing") and entry["tracing"]["n"] == found["n"]
    assert entry["tracing"]["top"] == found["top"] and entry["tracing"]["heat"]["rows"] == found["heat"]["rows"]
    with_method = {**RECORD, "methods": {**RECORD["methods"], "command": "the whole command's wall time"}}
    record = record_file.add(with_method, entry, classes)
    text = tables.TABLES["tracing"](record)
    assert "record tracing-multi30k-de-en-1" in text and heat_table(found["heat"]) in text
    assert found["top"][0]["slice"] in text
    path = tmp_path / "record.json"
    record_file.save(path, record)
    assert draw_tracing(path, tmp_path / "tracing.png").stat().st_size > 0
    with pytest.raises(UserError, match="a causal-tracing study needs both tracing and tracing_of"):
        record_file.check({**record, "runs": [{k: v for k, v in entry.items() if k != "tracing_of"}]}, "the record")


def test_a_record_without_a_study_draws_nothing_and_says_what_to_run(tmp_path):
    path = tmp_path / "record.json"
    record_file.save(path, RECORD)
    with pytest.raises(UserError, match="records no causal-tracing study: run qkvmt patch, then add it"):
        draw_tracing(path, tmp_path / "none.png")
