"""qkvmt sinks: Model.sinks on a split or files, written whole as sinks.json, sinks.md and
sinks.png; recorded by qkvmt results add=, tabled from the record and drawn by qkvmt figures."""

import json

import pytest

import qkvmt
import qkvmt.studies.sinks.result
from qkvmt.errors import UserError
from qkvmt.pipeline.sinks import sinks
from qkvmt.record import from_study, record_file, tables
from qkvmt.record.study_figures import draw_self, draw_sinks
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference
from tests.record.conftest import RECORD
from tests.studies.sinks.test_corpus import REFERENCES, SOURCES


def run(tmp_path, *overrides):
    src, ref = tmp_path / "s.de", tmp_path / "r.en"
    src.write_text("".join(s + "\n" for s in SOURCES))
    ref.write_text("".join(r + "\n" for r in REFERENCES))
    settings = ["ckpt_path=multi30k-de-en", f"src_file={src}", f"ref_file={ref}", *overrides]
    return sinks(compose_inference("sinks", *settings))


def test_the_command_writes_what_the_model_finds(tmp_path, capsys):
    out = tmp_path / "out"
    result = run(tmp_path, f"output_dir={out}", "n=2")
    assert {p.name for p in out.iterdir()} == {"sinks.json", "sinks.md", "sinks.png"}
    assert json.loads((out / "sinks.json").read_text()) == {k: v for k, v in result.items() if k != "output_dir"}
    direct = qkvmt.load("multi30k-de-en", device="cpu").sinks(SOURCES, REFERENCES, n=2).result
    assert result["readings"] == direct["readings"] and result["n"] == 2
    printed = capsys.readouterr().out
    assert "| layer | forced: `</s>` |" in printed and f"wrote {out}" in printed


def test_nothing_is_left_when_a_file_cannot_be_written(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(qkvmt.studies.sinks.result, "sink_plot", broken)
    with pytest.raises(OSError, match="disk full"):
        run(tmp_path, f"output_dir={tmp_path / 'parent' / 'out'}", "n=1")
    assert not (tmp_path / "parent").exists() or not any((tmp_path / "parent").iterdir())


def test_a_bad_count_is_one_line_before_the_model_loads(tmp_path):
    r = run_script("sinks", f"ckpt_path={tmp_path / 'no-such.ckpt'}", "n=0")
    assert user_error(r) == "error: n=0: give a whole number of at least 1"


def test_the_study_is_recorded_tabled_and_drawn(tmp_path):
    out = tmp_path / "out"
    run(tmp_path, f"output_dir={out}", "n=2")
    entry, classes = from_study.entry(out, conditions="a test", taken_ids=())
    assert entry["sinks_of"] == "multi30k-de-en" and entry["id"] == "sinks-multi30k-de-en-1"
    assert "and self-attention's on each query's own position, multi30k-de-en" in entry["what"]
    assert entry["command"].endswith("qkvmt sinks ckpt_path=multi30k-de-en split=s.de n=2")
    found = json.loads((out / "sinks.json").read_text())
    assert entry["sinks"]["readings"]["free"][1]["eos"] == pytest.approx(found["readings"]["free"][1]["eos"], 1e-5)
    with_method = {**RECORD, "methods": {**RECORD["methods"], "command": "the whole command's wall time"}}
    record = record_file.add(with_method, entry, classes)
    text = tables.TABLES["sinks"](record)
    forced = found["readings"]["forced"][2]
    assert "record sinks-multi30k-de-en-1" in text and f"| 2 | {100 * forced['eos']:.1f}% |" in text
    assert f"| encoder | 2 | {100 * found['self']['forced']['encoder'][2]['own']:.1f}% |" in text
    path = tmp_path / "record.json"
    record_file.save(path, record)
    assert draw_sinks(path, tmp_path / "sinks.png").stat().st_size > 0
    assert draw_self(path, tmp_path / "self.png").stat().st_size > 0
    record_file.save(path, with_method)
    with pytest.raises(UserError, match="records no study of the sinks: run qkvmt sinks"):
        draw_sinks(path, tmp_path / "none.png")
    with pytest.raises(UserError, match="a study of the sinks needs both sinks and sinks_of"):
        record_file.check({**record, "runs": [{k: v for k, v in entry.items() if k != "sinks_of"}]}, "the record")


def test_a_study_of_a_checkpoint_is_recorded_under_the_name_given(tmp_path):
    """A checkpoint's path names a folder of one machine: of= names the model instead, and a study
    recorded before self-attention was measured still tables, with nothing of it drawn."""
    out = tmp_path / "out"
    run(tmp_path, f"output_dir={out}", "n=1")
    entry, classes = from_study.entry(out, of="de-en-run-7", taken_ids=())
    assert (entry["id"], entry["sinks_of"], entry["sinks"]["model"]) == ("sinks-de-en-run-7-1", *["de-en-run-7"] * 2)
    assert entry["command"].endswith("qkvmt sinks ckpt_path=<the checkpoint of de-en-run-7> split=s.de n=1")
    older = {**entry, "sinks": {k: v for k, v in entry["sinks"].items() if k != "self"}}
    with_method = {**RECORD, "methods": {**RECORD["methods"], "command": "the whole command's wall time"}}
    record = record_file.add(with_method, older, classes)
    text = tables.TABLES["sinks"](record)
    assert "record sinks-de-en-run-7-1" in text and "| encoder |" not in text
    path = tmp_path / "record.json"
    record_file.save(path, record)
    with pytest.raises(UserError, match="records no study of self-attention's own position: run qkvmt sinks"):
        draw_self(path, tmp_path / "self.png")


def test_models_of_different_depths_are_drawn_each_at_its_own_layers(tmp_path, monkeypatch):
    """A bar stands at each (kind, layer) a model has, at that layer's place; the deeper model's
    layers set the axis."""

    def study(encoder, decoder):
        def layers(shares):
            return [{"layer": i, "own": s, "heads": [{"head": 0, "own": s}]} for i, s in enumerate(shares)]

        return {"self": {r: {"encoder": layers(encoder), "decoder": layers(decoder)} for r in ("forced", "free")}}

    deep, shallow = study([0.1, 0.2, 0.3], [0.4, 0.5]), study([0.6], [0.7, 0.8])
    drawn = {}
    monkeypatch.setattr(qkvmt.studies.sinks.result, "_save", lambda fig, path, title: drawn.update(fig=fig))
    qkvmt.studies.sinks.result.self_plot({"deep": deep, "shallow": shallow}, tmp_path / "self.png")
    (ax,) = drawn["fig"].axes
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["encoder 0", "encoder 1", "encoder 2", "decoder 0", "decoder 1"]
    bars = {c.get_label(): [(round(p.get_x() + p.get_width() / 2), p.get_height()) for p in c] for c in ax.containers}
    assert bars == {"deep": list(zip(range(5), [0.1, 0.2, 0.3, 0.4, 0.5])), "shallow": [(0, 0.6), (3, 0.7), (4, 0.8)]}
