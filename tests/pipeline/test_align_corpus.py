"""qkvmt align src_file= tgt_file=: one Pharaoh line per pair, each the pair's own links (those
`qkvmt align sentence=` gives it), read from .gz or plain files a chunk at a time, written whole
or not at all, with a summary and warnings that name the lines left empty."""

import gzip
import json
import logging

import pytest

import qkvmt
from qkvmt.alignment.directions import Direction, both_ways
from qkvmt.alignment.links import alignment_scores, to_pharaoh
from qkvmt.errors import UserError
from qkvmt.pipeline.align import align
from qkvmt.studies import corpus
from qkvmt.text.sources import LineFile, read_lines
from tests.alignment.test_reference import reversed_pairs
from tests.conftest import compose_inference

LONG = " ".join(f"w{i % 40}" for i in range(300))  # over the tiny model's 256 positions


def write_pairs(folder, trained_run, n: int = 20):
    """A gzipped source file and a plain target file: n toy pairs with an empty line on either
    side and a pair too long for the model among them."""
    src = read_lines(trained_run["corpus"] / "train.de.gz")[:n]
    tgt = read_lines(trained_run["corpus"] / "train.en.gz")[:n]
    src[3], tgt[7], src[12] = "", "", LONG
    folder.mkdir()
    (folder / "src.de.gz").write_bytes(gzip.compress("".join(s + "\n" for s in src).encode()))
    (folder / "tgt.en").write_text("".join(t + "\n" for t in tgt))
    return folder / "src.de.gz", folder / "tgt.en", src, tgt


def corpus_cfg(ckpt, src_file, tgt_file, out, *more):
    # chunks of 6 pairs and small batches: several chunks, several batches of mixed lengths each
    return compose_inference(
        "align",
        f"ckpt_path={ckpt}",
        f"src_file={src_file}",
        f"tgt_file={tgt_file}",
        f"output_dir={out}",
        "chunk_pairs=6",
        "batch_tokens=64",
        *more,
    )


BEST = {"layer": 1, "head": 3, "rows": "reading", "direction": "source_to_target"}  # as an AER run records it


@pytest.mark.parametrize(
    "overrides, chosen",
    [
        ([], {"layer": 0, "head": "mean", "rows": "predicting", "direction": "target_to_source"}),
        (
            ["alignment.layer=1", "alignment.head=2", "alignment.direction=intersection"],
            {"layer": 1, "head": 2, "rows": "predicting", "direction": "intersection"},
        ),
        (["alignment.head=best"], BEST),
    ],
)
def test_each_line_is_the_pairs_own_links(overrides, chosen, trained_run, tmp_path, capsys, caplog):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    src_file, tgt_file, src, tgt = write_pairs(tmp_path / "in", trained_run)
    (tmp_path / "aer.json").write_text(json.dumps({"best": BEST | {"signal": "weights"}}))
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING):
        result = align(
            corpus_cfg(ckpt, src_file, tgt_file, out, *overrides, f"alignment.aer_file={tmp_path / 'aer.json'}")
        )
    lines = (out / "alignment.pharaoh").read_text().split("\n")
    assert lines[-1] == "" and len(lines) == len(src) + 1  # one line per pair, each ended
    model = qkvmt.load(ckpt, device="cpu")
    policy = model.policy(chosen)
    for i, (s, t) in enumerate(zip(src, tgt)):
        expected = "" if i in (3, 7, 12) else model.align(s, t, policy).pharaoh
        assert lines[i] == expected, i
    summary = json.loads((out / "corpus.json").read_text())
    assert summary["policy"] | chosen == summary["policy"]  # recorded as align.policy() records it
    assert (summary["pairs"], summary["aligned"], summary["empty"], summary["too_long"]) == (20, 17, 2, 1)
    assert summary["too_long_first_lines"] == [13] and summary["pairs_per_second"] > 0
    assert summary["ckpt_path"] == [str(ckpt)] and result["output_dir"] == str(out)
    warning = "1 pair(s) with a side longer than the model's max_positions=256 allow got an empty line (lines 13)"
    assert warning in caplog.text
    assert capsys.readouterr().out.strip().endswith(str(out / "alignment.pharaoh"))


def test_two_models_give_each_pairs_symmetrized_links(trained_run, reverse_run, tmp_path):
    forward_ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    reverse_ckpt = reverse_run["run"] / "checkpoints" / "last.ckpt"
    src_file, tgt_file, src, tgt = write_pairs(tmp_path / "in", trained_run)
    out = tmp_path / "out"
    align(corpus_cfg(forward_ckpt, src_file, tgt_file, out, f"reverse_ckpt_path={reverse_ckpt}", "symmetrize=union"))
    lines = (out / "alignment.pharaoh").read_text().splitlines()
    f = Direction(qkvmt.load(forward_ckpt, device="cpu"))
    r = Direction(qkvmt.load(reverse_ckpt, device="cpu"))
    for i, (s, t) in enumerate(zip(src, tgt)):
        expected = "" if i in (3, 7, 12) else to_pharaoh(both_ways(f, r, s, t, t).links("union"))
        assert lines[i] == expected, i
    summary = json.loads((out / "corpus.json").read_text())
    assert summary["policies"] == {"forward": f.policy.to_dict(), "reverse": r.policy.to_dict()}
    assert summary["symmetrize"] == "union" and summary["reverse_ckpt_path"] == [str(reverse_ckpt)]


def test_an_interrupted_run_leaves_no_output(trained_run, tmp_path, monkeypatch):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    src_file, tgt_file, _, _ = write_pairs(tmp_path / "in", trained_run)
    real, calls = corpus.corpus_links, []

    def interrupted(*args, **kwargs):  # Ctrl-C as the second chunk is aligned, after the first is written
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(corpus, "corpus_links", interrupted)
    parent = tmp_path / "outputs"
    parent.mkdir()
    with pytest.raises(KeyboardInterrupt):
        align(corpus_cfg(ckpt, src_file, tgt_file, parent / "out"))
    assert list(parent.iterdir()) == []  # neither the folder nor a staged part of it


def test_another_signal_than_the_weights_is_one_line_before_any_output(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    src_file, tgt_file, _, _ = write_pairs(tmp_path / "in", trained_run)
    with pytest.raises(UserError, match="alignment.signal=alti: src_file= aligns a corpus by attention weights only"):
        align(corpus_cfg(ckpt, src_file, tgt_file, tmp_path / "out", "alignment.signal=alti"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("setting", ["batch_tokens=0", "chunk_pairs=-3", "chunk_pairs=1.5"])
def test_a_bad_batch_or_chunk_size_is_refused_before_the_model_loads(setting, tmp_path):
    (tmp_path / "a").write_text("w1\n")
    (tmp_path / "b").write_text("t1\n")
    cfg = compose_inference(
        "align", "ckpt_path=nope", f"src_file={tmp_path / 'a'}", f"tgt_file={tmp_path / 'b'}", setting
    )
    name, value = setting.split("=")
    with pytest.raises(UserError, match=rf"^{name}={value}: give a whole number of at least 1$"):
        align(cfg)


def test_files_that_change_while_they_are_read_are_refused(tmp_path):
    (tmp_path / "a").write_text("w1\nw2\nw3\n")
    (tmp_path / "b").write_text("t1\nt2\n")  # counted as 3 lines, now 2
    read = corpus.chunks(LineFile(tmp_path / "a", 3), LineFile(tmp_path / "b", 3), 2)
    assert next(read) == (["w1", "w2"], ["t1", "t2"])
    with pytest.raises(UserError, match="changed while being aligned"):
        next(read)


def test_eflomal_beside_aligns_the_same_pairs_line_for_line(trained_run, tmp_path):
    src, tgt, truth = reversed_pairs(400)
    src.insert(5, "")  # an empty side keeps its line, empty, in both outputs
    tgt.insert(5, "t1 t2")
    (tmp_path / "c.de").write_text("".join(s + "\n" for s in src))
    (tmp_path / "c.en").write_text("".join(t + "\n" for t in tgt))
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    out = tmp_path / "out"
    summary = align(corpus_cfg(ckpt, tmp_path / "c.de", tmp_path / "c.en", out, "reference_aligner=eflomal"))
    lines = (out / "reference.pharaoh").read_text().split("\n")
    assert len(lines) == len(src) + 1 and lines[-1] == "" and lines[5] == ""
    del lines[5]
    # a line shifted by one pair would link words its pair does not have
    found = [{tuple(map(int, x.split("-"))) for x in line.split()} for line in lines[:-1]]
    scores = alignment_scores(found, truth, truth)
    assert scores["precision"] > 0.9 and scores["recall"] > 0.9, scores
    reference = json.loads((out / "corpus.json").read_text())["reference"]
    assert reference == summary["reference"] and reference["aligner"] == "eflomal" and reference["pairs_per_second"] > 0
    assert reference["symmetrization"] == "grow-diag-final-and"


@pytest.mark.parametrize(
    "mode, setting",
    [
        ("src_file", "leaderboard=true"),
        ("src_file", "gold_dev=100"),
        ("sentence", "reference_aligner=eflomal"),
        ("sentence", "leaderboard=true"),
    ],
)
def test_a_setting_of_scoring_against_gold_links_is_refused_without_them(mode, setting, tmp_path):
    (tmp_path / "a").write_text("w1\n")
    (tmp_path / "b").write_text("t1\n")
    given = [f"src_file={tmp_path / 'a'}", f"tgt_file={tmp_path / 'b'}"] if mode == "src_file" else ["sentence=w1"]
    cfg = compose_inference("align", "ckpt_path=nope", *given, setting, f"output_dir={tmp_path / 'out'}")
    with pytest.raises(
        UserError, match=rf"^{setting.split('=')[0]}=.* belongs to scoring against gold links: add gold_dir"
    ):
        align(cfg)
    assert not (tmp_path / "out").exists()
