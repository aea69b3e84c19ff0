"""qkvmt intervene study=lens: each encoder depth's translations of a corpus, scored by sacreBLEU
against the references and the model's own; written atomically, recorded by qkvmt results add=,
and drawn by qkvmt figures."""

import json

import pytest
import sacrebleu

import qkvmt
from qkvmt.errors import UserError
from qkvmt.pipeline.intervene import intervene_command
from qkvmt.record import from_study, record_file, tables
from qkvmt.record.study_figures import draw_lens
from qkvmt.studies.lens.passes import encoder_depth
from tests.conftest import compose_inference
from tests.record.conftest import RECORD
from tests.studies.kv.test_study import SENTENCES

REFERENCES = [
    "A dog runs across a green meadow .",
    "A woman reads a book in the park .",
    "Two children play in the snow .",
    "A man rides a bike on the street .",
]


def run(tmp_path, *overrides):
    src, ref = tmp_path / "s.de", tmp_path / "r.en"
    src.write_text("".join(s + "\n" for s in SENTENCES))
    ref.write_text("".join(r + "\n" for r in REFERENCES))
    settings = ["study=lens", "ckpt_path=multi30k-de-en", f"src_file={src}", f"ref_file={ref}", *overrides]
    return intervene_command(compose_inference("intervene", *settings))


def test_each_depths_translations_are_scored_against_the_references_and_the_model(tmp_path):
    out = tmp_path / "out"
    result = run(tmp_path, f"output_dir={out}")
    assert {p.name for p in out.iterdir()} == {"study.json", "study.md", "translations.txt"}
    assert json.loads((out / "study.json").read_text()) == {k: v for k, v in result.items() if k != "output_dir"}
    model = qkvmt.load("multi30k-de-en", device="cpu")
    own = list(model.translate(SENTENCES))
    lines = [line.split("\t") for line in (out / "translations.txt").read_text().splitlines()]
    for depth in (1, 2, 3):
        with encoder_depth(model.transformer, depth):
            expected = list(model.translate(SENTENCES))
        assert [t for d, t in lines if d == str(depth)] == expected
        row = result["depths"][depth - 1]
        assert row["chrf"] == pytest.approx(sacrebleu.corpus_chrf(expected, [REFERENCES]).score)
        assert row["bleu"] == pytest.approx(sacrebleu.corpus_bleu(expected, [REFERENCES]).score)
        assert row["chrf_vs_model"] == pytest.approx(sacrebleu.corpus_chrf(expected, [own]).score)
        assert row["same_as_model"] == sum(e == o for e, o in zip(expected, own)) / len(own)
    assert result["depths"][-1]["chrf_vs_model"] == 100 and result["depths"][-1]["same_as_model"] == 1


def test_the_study_is_recorded_tabled_and_drawn(tmp_path):
    out = tmp_path / "out"
    run(tmp_path, f"output_dir={out}", "n=2")
    entry, classes = from_study.entry(out, conditions="a test", taken_ids=())
    assert entry["lens_of"] == "multi30k-de-en" and entry["id"] == "lens-multi30k-de-en-1"
    assert entry["command"].endswith("qkvmt intervene study=lens ckpt_path=multi30k-de-en split=s.de n=2")
    with_method = {**RECORD, "methods": {**RECORD["methods"], "command": "the whole command's wall time"}}
    record = record_file.add(with_method, entry, classes)
    text = tables.TABLES["lens"](record)
    assert "record lens-multi30k-de-en-1" in text and "| 1..3 |" in text
    path = tmp_path / "record.json"
    record_file.save(path, record)
    assert draw_lens(path, tmp_path / "lens.png").stat().st_size > 0
    record_file.save(path, with_method)
    with pytest.raises(UserError, match="records no DecoderLens study"):
        draw_lens(path, tmp_path / "none.png")


def test_an_unknown_study_or_count_is_one_line_before_any_work(tmp_path):
    with pytest.raises(UserError, match=r"^study='lenses': use one of swap, patch, both, lens$"):
        intervene_command(compose_inference("intervene", "study=lenses", "ckpt_path=multi30k-de-en"))
    with pytest.raises(UserError, match=r"^n=0: give a whole number of at least 1$"):
        run(tmp_path, "n=0")
