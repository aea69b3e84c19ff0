"""scripts/evaluate.py's function: scores, signatures, outputs, and agreement with validation."""

import csv
import gzip
import hashlib
import json
import re

import pytest
from sacremoses import MosesTokenizer

from qkvmt.errors import UserError
from qkvmt.pipeline.evaluate import evaluate, read_inputs
from tests.conftest import compose_inference, write_corpus


def run_eval(trained_run, *overrides):
    corpus = trained_run["corpus"]
    return evaluate(compose_inference("evaluate", f"data.root={corpus}", *overrides))


def test_validation_bleu_equals_evaluate_bleu_on_the_same_checkpoint(trained_run, tmp_path):
    run = trained_run["run"]
    with open(run / "csv" / "metrics.csv") as f:
        last_val = [r for r in csv.DictReader(f) if r.get("val/bleu")][-1]
    assert int(last_val["step"]) == 39  # the validation at the end of step 40, which last.ckpt holds
    m = run_eval(
        trained_run,
        f"ckpt_path={run / 'checkpoints' / 'last.ckpt'}",
        "split=val",
        "decode.beam_size=1",
        "attention.num_samples=0",  # the scores are what counts here
        f"output_dir={tmp_path}",  # module.val_decode's settings
    )
    assert m["chrf"] > 0  # a real comparison, not two empty outputs
    assert m["bleu"] == pytest.approx(float(last_val["val/bleu"]), abs=1e-4)
    assert m["chrf"] == pytest.approx(float(last_val["val/chrf"]), abs=1e-4)


def test_evaluate_writes_hypotheses_and_metrics(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "best.ckpt"
    m = run_eval(trained_run, f"ckpt_path={ckpt}", "attention.num_samples=0", f"output_dir={tmp_path}")  # maps: below
    written = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("bleu", "chrf", "bleu_lc", "n", "decode", "wall_s", "sent_per_s", "checkpoints"):
        assert key in written
    assert set(written["signatures"]) == {"bleu", "chrf", "bleu_lc", "sentence_bleu", "sentence_chrf"}
    assert "case:lc" in written["signatures"]["bleu_lc"] and "case:mixed" in written["signatures"]["bleu"]
    assert written["decode"]["beam_size"] == 5 and written["n"] == 24
    assert written["checkpoints"] == [{"path": str(ckpt), "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest()}]
    hyps = (tmp_path / "hypotheses.txt").read_text().split("\n")
    assert len(hyps) == 24 + 1 and hyps[-1] == ""  # one line per source line
    assert m["bleu"] == written["bleu"]


def test_evaluate_unseen_parallel_files_plain_and_gz(trained_run, tmp_path):
    src = ["w1 w2 w3", "", "w4 w5"]
    ref = ["t3 t2 t1", "", "t5 t4"]
    (tmp_path / "x.de").write_text("\n".join(src) + "\n")
    (tmp_path / "x.en.gz").write_bytes(gzip.compress(("\n".join(ref) + "\n").encode()))
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    m = run_eval(
        trained_run,
        f"ckpt_path={ckpt}",
        f"src_file={tmp_path / 'x.de'}",
        f"ref_file={tmp_path / 'x.en.gz'}",
        f"output_dir={tmp_path / 'out'}",
    )
    hyps = (tmp_path / "out" / "hypotheses.txt").read_text().splitlines()
    assert m["n"] == 3 and len(hyps) == 3 and hyps[1] == ""


def test_bleu_tok_lc_scores_against_moses_tokenized_lowercased_references(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    quick = ("decode.beam_size=1", "attention.num_samples=0")  # the scores are what counts here
    first = run_eval(trained_run, f"ckpt_path={ckpt}", *quick, f"output_dir={tmp_path / 'a'}")
    hyps = (tmp_path / "a" / "hypotheses.txt").read_text().splitlines()
    # References that are exactly the hypotheses, prepared as the Multi30k tok/ files are.
    tok = MosesTokenizer(lang="en")
    (tmp_path / "ref.tok").write_text(
        "".join(tok.tokenize(h, return_str=True, escape=True).lower() + "\n" for h in hyps)
    )
    m = run_eval(
        trained_run, f"ckpt_path={ckpt}", *quick, f"ref_tok_file={tmp_path / 'ref.tok'}", f"output_dir={tmp_path / 'b'}"
    )
    assert m["bleu_tok_lc"] == pytest.approx(100.0)
    assert "tok:none" in m["signatures"]["bleu_tok_lc"] and "case:lc" in m["signatures"]["bleu_tok_lc"]
    assert m["bleu"] == first["bleu"]


def test_default_output_dir_is_new_beside_the_run(trained_run):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    quick = (f"ckpt_path={ckpt}", "decode.beam_size=1", "attention.num_samples=0")  # the folder is what counts here
    a, b = (run_eval(trained_run, *quick)["output_dir"] for _ in range(2))
    assert a != b
    for out in (a, b):
        assert str(out).startswith(str(trained_run["run"] / "evaluations"))


def test_evaluate_an_average_of_the_last_checkpoints(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    m = run_eval(trained_run, f"ckpt_path={ckpt}", "average=last2", f"output_dir={tmp_path}")
    assert [c["path"].rsplit("/", 1)[-1] for c in m["checkpoints"]] == ["step0000020.ckpt", "step0000040.ckpt"]


def test_src_file_without_ref_file_is_a_user_error(trained_run, tmp_path):
    with pytest.raises(UserError, match="ref_file"):
        run_eval(trained_run, f"ckpt_path={trained_run['run'] / 'checkpoints' / 'last.ckpt'}", f"src_file={tmp_path}")


def test_evaluate_exports_attention_next_to_the_scores(trained_run, tmp_path):
    import numpy as np

    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    run_eval(
        trained_run, f"ckpt_path={ckpt}", "attention.num_samples=2", "decode.beam_size=2", f"output_dir={tmp_path}"
    )
    pngs = sorted(p.name for p in (tmp_path / "attention").iterdir())
    picked = sorted({int(name[:4]) for name in pngs})  # the first two sentences with a translation
    assert len(picked) == 2 and pngs == [f"{i:04d}_{k}.png" for i in picked for k in ("cross", "decoder", "encoder")]
    arrays = np.load(tmp_path / "attention.npz")
    cross = arrays[f"s{picked[0]}_cross"]
    assert cross.shape[:2] == (2, 4) and cross.shape[3] == len(arrays[f"s{picked[0]}_src_tokens"])
    assert cross.shape[2] == len(arrays[f"s{picked[0]}_out_tokens"]) == len(arrays[f"s{picked[0]}_tgt_tokens"])
    assert arrays[f"s{picked[0]}_out_tokens"][-1] == "</s>" and arrays[f"s{picked[0]}_tgt_tokens"][0] == "<s>"
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=1e-4)
    html = (tmp_path / "report.html").read_text()
    assert "BLEU" in html and json.loads((tmp_path / "metrics.json").read_text())["signatures"]["bleu"] in html
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1))
    assert [p["step"] for p in data["curve"]] == [20, 40]  # the run validated at steps 20 and 40
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the same curve, as a figure
    assert html.count("sentence scores</dt>") == 2 and "eff:yes" in html
    words = data["samples"][0]["alignment"]  # the default policy's links: every target word has one
    assert sorted(j for _, j in words["links"]) == list(range(len(words["tgt_words"])))


def test_the_report_shows_the_signals_asked_for_and_refuses_one_that_is_not_registered(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    with pytest.raises(UserError, match="attention.signals: alt is no signal; list some of weights, value_norms"):
        run_eval(trained_run, f"ckpt_path={ckpt}", "attention.signals=[alt]", f"output_dir={tmp_path / 'refused'}")
    assert not (tmp_path / "refused").exists()  # refused before anything ran
    run_eval(
        trained_run,
        f"ckpt_path={ckpt}",
        "attention.num_samples=1",
        "attention.signals=[alti]",
        f"output_dir={tmp_path}",
    )
    html = (tmp_path / "report.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1))
    assert set(data["samples"][0]["attention"]["cross"]["signals"]) == {"alti"}  # beside the weights, no other


def test_report_shows_hostile_sources_and_references_only_as_text(trained_run, tmp_path):
    import html

    src = ["w1 <script>alert(1)</script> w2", """w3 "w4" 'w5' & <img src=x onerror=alert(2)>"""]
    ref = ["t2 </script><b>t1</b>", "t5 t4 t3"]
    (tmp_path / "x.de").write_text("".join(line + "\n" for line in src))
    (tmp_path / "x.en").write_text("".join(line + "\n" for line in ref))
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    run_eval(
        trained_run,
        f"ckpt_path={ckpt}",
        f"src_file={tmp_path / 'x.de'}",
        f"ref_file={tmp_path / 'x.en'}",
        "decode.beam_size=1",
        "decode.min_len=3",
        f"output_dir={tmp_path / 'out'}",
    )
    # min_len: a sentence whose translation came out empty would have no sample in the report
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    for text in src + ref:
        assert html.escape(text, quote=True) in page
    assert "<script>alert" not in page and "<img src" not in page and "<b>" not in page
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the template's own two


@pytest.mark.parametrize("own_run", [False, True])
def test_split_test_is_the_runs_test_split_or_multi30ks_without_a_run(tmp_path, own_run):
    corpus = write_corpus(tmp_path / "corpus", sizes={"val": 3, "test_2016_flickr": 5})
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    if own_run:  # a run that named another split its test: its names win over the config's
        (run / "run.json").write_text(
            json.dumps(
                {
                    "data": {
                        "source": {"_target_": "qkvmt.text.sources.TextFiles", "_partial_": True},
                        "root": str(corpus),
                        "splits": {"val": "val", "test": "val"},
                    }
                }
            )
        )
    meta = type("Meta", (), {"src_lang": "de", "tgt_lang": "en"})
    cfg = compose_inference("evaluate", f"data.root={corpus}", "split=test")
    src, refs, name = read_inputs(cfg, meta, run / "checkpoints" / "best.ckpt")
    expected = "val" if own_run else "test_2016_flickr"
    assert (src, refs) == tuple(
        gzip.decompress((corpus / f"{expected}.{lang}.gz").read_bytes()).decode().splitlines() for lang in ("de", "en")
    )
    assert name == expected


def test_a_run_on_plain_files_is_evaluated_on_its_own_folder_without_data_root(tmp_path):
    """run.json records the folder the run read; evaluate reads the split there, without data.root=."""
    corpus = write_corpus(tmp_path / "corpus", sizes={"val": 3, "test_2016_flickr": 5}, gz=False)
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    source = {"_target_": "qkvmt.text.sources.TextFiles", "_partial_": True, "download_url": None}
    (run / "run.json").write_text(json.dumps({"data": {"source": source, "root": str(corpus)}}))
    meta = type("Meta", (), {"src_lang": "de", "tgt_lang": "en"})
    cfg = compose_inference("evaluate", f"data.root={tmp_path / 'elsewhere'}", "split=test_2016_flickr")
    src, refs, name = read_inputs(cfg, meta, run / "checkpoints" / "best.ckpt")
    assert (src, refs) == tuple((corpus / f"test_2016_flickr.{lang}").read_text().splitlines() for lang in ("de", "en"))
    assert name == "test_2016_flickr"


def test_a_baseline_file_is_compared_and_its_scores_sit_beside_each_sentences(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    quick = ("decode.beam_size=1", "attention.num_samples=0")
    first = run_eval(trained_run, f"ckpt_path={ckpt}", *quick, f"output_dir={tmp_path / 'a'}")
    hyps = tmp_path / "a" / "hypotheses.txt"
    m = run_eval(
        trained_run,
        f"ckpt_path={ckpt}",
        *quick,
        "significance.samples.bs=100",  # only with a baseline: without one they would be refused
        "significance.samples.ar=100",
        f"baseline.hyps_file={hyps}",
        "metrics.bleu_tokenize=char",
        f"output_dir={tmp_path / 'b'}",
    )
    tested = m["significance"]
    assert tested["baseline"] == str(hyps) and set(tested) == {"baseline", "seed", "bs", "ar"}
    assert tested["bs"]["bleu"]["system"] == tested["bs"]["bleu"]["baseline"] == m["bleu"] != first["bleu"]
    assert "tok:char" in m["signatures"]["bleu"] and "tok:char" in tested["bs"]["signatures"]["bleu"]
    rows = [json.loads(line) for line in (tmp_path / "b" / "sentences.jsonl").read_text().splitlines()]
    assert len(rows) == m["n"] and all(r["bleu"] == r["baseline_bleu"] for r in rows)  # the same translations


def test_a_baseline_file_of_another_length_names_it(trained_run, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("one line\n")
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    with pytest.raises(UserError, match=f"baseline.hyps_file {short} has 1 lines, the source has"):
        run_eval(trained_run, f"ckpt_path={ckpt}", f"baseline.hyps_file={short}", f"output_dir={tmp_path / 'o'}")
    assert not (tmp_path / "o").exists()


def test_a_run_given_its_test_split_by_path_is_evaluated_on_those_files(tmp_path):
    """data.test=FILE.tsv in run.json: split=test reads that file, not the source's test split."""
    corpus = write_corpus(tmp_path / "corpus", sizes={"val": 3, "test_2016_flickr": 5}, gz=False)
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("ein Hund\ta dog\nzwei Katzen\ttwo cats\n")
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    source = {"_target_": "qkvmt.text.sources.TextFiles", "_partial_": True}
    (run / "run.json").write_text(json.dumps({"data": {"source": source, "root": str(corpus), "test": str(tsv)}}))
    meta = type("Meta", (), {"src_lang": "de", "tgt_lang": "en"})
    cfg = compose_inference("evaluate", f"data.root={corpus}", "split=test")
    assert read_inputs(cfg, meta, run / "checkpoints" / "best.ckpt") == (
        ["ein Hund", "zwei Katzen"],
        ["a dog", "two cats"],
        "test",
    )
