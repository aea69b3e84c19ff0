"""The Model's methods over many sentences or two models (qkvmt.studies.methods), on the bundled
models: each returns a result that shows itself in a notebook and saves the files its command
writes, and reads what it is given as the Model's other methods do."""

import json

import pytest

import qkvmt
from qkvmt.errors import UserError
from qkvmt.text.tokenizer import encode
from tests.pipeline.test_align import write_gold

SOURCES = ["Ein Hund rennt über eine grüne Wiese .", "", "Ein Mann fährt Fahrrad .", "Zwei Frauen lachen ."]
TARGETS = ["A dog runs across a green meadow .", "A cat .", "A man rides a bike .", "Two women laugh ."]
LONG = " ".join(["Hund"] * 300)  # over the bundled models' 256 positions


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="module")
def reverse(model):
    return qkvmt.load("multi30k-en-de", device="cpu")


def shown_and_saved(result, folder, files: set[str]) -> None:
    """The result shows itself in a notebook and saves exactly its command's files."""
    assert result._repr_html_().startswith("<iframe")
    result.save(folder)
    assert {p.name for p in folder.iterdir()} == files


def test_align_corpus_streams_each_pairs_own_links_once(model, tmp_path):
    sources, targets = [*SOURCES, LONG], [*TARGETS, "dog"]
    result = model.align_corpus(sources, targets)
    lines = list(result)
    for s, t, line in zip(sources, targets, lines):
        assert line == ("" if not s or s == LONG else model.align(s, t).pharaoh)
    assert len(lines) == len(sources) and result.summary()["too_long_first_lines"] == [5]
    assert result.warnings() == [
        "1 pair(s) with a side longer than the model's max_positions=256 allow got an empty line (lines 5)"
    ]
    with pytest.raises(UserError, match="read once"):
        list(result)
    again = model.align_corpus(sources, targets)
    shown_and_saved(again, tmp_path / "out", {"alignment.pharaoh", "corpus.json"})
    assert (tmp_path / "out" / "alignment.pharaoh").read_text().split("\n")[:-1] == lines
    assert json.loads((tmp_path / "out" / "corpus.json").read_text())["empty"] == 1


def test_two_models_link_a_sentence_and_a_corpus_alike(model, reverse, tmp_path):
    both = [model.align_both(s, reverse, t) for s, t in zip(SOURCES[::2], TARGETS[::2])]
    assert all(b.symmetrize == "soft-mean" and b.forced for b in both)  # both bundled models have a supervised head
    by_name = model.align_both(SOURCES[0], "multi30k-en-de", TARGETS[0])
    assert by_name.to_dict() == both[0].to_dict()
    corpus = model.align_corpus(SOURCES[::2], TARGETS[::2], reverse)
    assert list(corpus) == [b.pharaoh for b in both]
    assert corpus.summary()["policies"] == both[0].policies
    shown_and_saved(both[0], tmp_path / "one", {"alignment.json"})
    with pytest.raises(UserError, match="policy= is one model's reading"):
        model.align_corpus(SOURCES, TARGETS, reverse, policy={"layer": 0})


@pytest.mark.parametrize(
    "sources, targets, message",
    [("Ein Hund .", ["A dog ."], "not texts"), (iter(["Ein Hund ."]), iter(["A dog ."]), "not iterators read once")],
)
def test_lines_are_lists_and_a_reference_aligner_reads_them_twice(model, sources, targets, message):
    with pytest.raises(UserError, match=message):
        model.align_corpus(sources, targets, reference_aligner="eflomal")


def test_aer_scores_one_models_readings_or_two_models_symmetrizations(model, reverse, tmp_path):
    gold = write_gold(
        tmp_path / "gold",
        [
            (["Ein", "Hund", "rennt", "."], ["A", "dog", "runs", "."], "1-1 2-2 3-3 4-4"),
            (["Zwei", "Frauen", "lachen", "."], ["Two", "women", "laugh", "."], "1-1 2-2 3-3 4p4"),
        ],
    )
    one = model.aer(gold)
    assert one.scores["n"] == 2 and one.grid.shape == (3, 5) and one.summary().startswith("best: layer")
    shown_and_saved(one, tmp_path / "one", {"aer.json", "aer.png"})
    two = model.aer(gold, reverse)
    assert {"forward", "reverse", "grow-diag-final-and"} <= set(two.scores["by_method"])
    assert len(two.pharaoh) == 2 and "forward: AER" in two.summary().splitlines()[0]
    shown_and_saved(two, tmp_path / "two", {"aer.json", "alignment.pharaoh"})
    with pytest.raises(UserError, match="leaderboard= scores one model's own heads"):
        model.aer(gold, reverse, leaderboard=True)
    with pytest.raises(UserError, match="symmetrize=union combines the links of two models"):
        model.aer(gold, symmetrize="union")


def test_heads_faithfulness_and_the_studies_are_results(model, tmp_path):
    heads = model.heads(SOURCES[::2], TARGETS[::2], prune_points=1, profile_sentences=1)
    assert len(heads.heads) == 36 and heads.decode["beam_size"] == 1 and heads.summary().startswith("unmasked")
    shown_and_saved(heads, tmp_path / "heads", {"heads.json", "heads.html", "pruning.png"})
    found = model.faithfulness(SOURCES, TARGETS, n=2, signals=["weights"], levels=0.5, random_draws=1)
    assert found.result["n"] == 2 and found.result["skipped"] == {"empty": 1, "too_long": 0}
    shown_and_saved(found, tmp_path / "faith", {"faithfulness.json", "faithfulness.md", "faithfulness.png"})
    study = model.study(SOURCES, "swap", n=2)
    assert study.result["study"] == "swap" and len(study.sentences) == study.result["n"]
    shown_and_saved(study, tmp_path / "kv", {"study.json", "study.md", "sentences.jsonl"})
    lens = model.lens_study(SOURCES, TARGETS, n=2)
    assert [d["encoder_layers"] for d in lens.result["depths"]] == [1, 2, 3] and len(lens.translations[0]) == 2
    shown_and_saved(lens, tmp_path / "lens", {"study.json", "study.md", "translations.txt"})


def test_faithfulness_forced_on_the_models_own_translations_is_as_with_them_given_as_references(model):
    own = model.translate(SOURCES)
    assert encode(model.tokenizer, list(own)) == own.ids  # as text they are the same subwords again
    settings = {"n": 2, "signals": ["weights"], "levels": [0.5, 1.0], "random_draws": 1}
    found = model.faithfulness(SOURCES, [""] * len(SOURCES), target="own", **settings).result
    given = model.faithfulness(SOURCES, list(own), **settings).result
    assert (found["target"], found["decoding"], given["target"]) == ("own", own.settings, "reference")
    assert found["readings"] == given["readings"] and found["random_aopc"] == given["random_aopc"]
    assert "without </s> and punctuation" in found["readings"][-1]["label"]


def test_evaluate_scores_and_draws_the_report_of_the_first_sentences(model, tmp_path):
    found = model.evaluate(SOURCES, TARGETS, samples=1, signals=["value_norms"])
    assert list(found.translations) == list(model.translate(SOURCES)) and found.metrics["n"] == len(SOURCES)
    assert found.summary().startswith("bleu") and found.metrics["decode"] == found.translations.settings
    shown_and_saved(
        found,
        tmp_path / "eval",
        {"hypotheses.txt", "metrics.json", "sentences.jsonl", "attention", "attention.npz", "report.html"},
    )
    assert sorted(p.name for p in (tmp_path / "eval" / "attention").iterdir()) == [
        "0000_cross.png",
        "0000_decoder.png",
        "0000_encoder.png",
    ]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.heads("Ein Hund .", ["A dog ."]), "sources is a list of sentences"),
        (lambda m: m.heads(["Ein Hund ."], [""]), "has no references to score against"),
        (lambda m: m.faithfulness(["a"], ["b"], signals=["nope"]), "'nope' is not a signal"),
        (lambda m: m.faithfulness(["a"], ["b"], target="hyp"), "target='hyp': force the pass on reference"),
        (lambda m: m.faithfulness(["a"], [""]), "no references: target=reference forces"),
        (lambda m: m.study(["a"], "nope"), "study='nope': use one of swap, patch, both"),
        (lambda m: m.lens_study(["a"], ["b"], n=0), "n=0: give a whole number"),
        (lambda m: m.align_corpus(["a"], ["b"], batch_tokens=0), "batch_tokens=0: give a whole number"),
        (lambda m: m.align_corpus(["a", "b"], ["c"]), "different numbers of lines"),
    ],
)
def test_bad_arguments_are_one_line(model, call, message):
    with pytest.raises(UserError, match=message):
        result = call(model)
        list(result)  # a corpus's lines are read as they are aligned
