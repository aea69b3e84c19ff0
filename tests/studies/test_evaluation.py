"""Model.evaluate as a practitioner compares systems: every sentence's own scores, BLEU's tokenizer
chosen, and sacreBLEU's paired tests against a second system given as translations or as a model."""

import json

import pytest
import sacrebleu

import qkvmt
from qkvmt.errors import UserError
from qkvmt.text.significance import paired_tests

SOURCES = [
    "Ein Hund rennt über eine grüne Wiese .",
    "Ein Mann fährt Fahrrad .",
    "Zwei Frauen lachen .",
    "Ein kleines Mädchen springt in eine Pfütze .",
    "Ein Mann mit einem orangefarbenen Hut , der etwas anstarrt .",
    "",
]
REFERENCES = [
    "A dog runs across a green meadow .",
    "A man rides a bike .",
    "Two women laugh .",
    "A little girl jumps into a puddle .",
    "A man in an orange hat staring at something .",
    "Nothing .",
]
QUICK = {"tests": ["bs", "ar"], "samples": {"bs": 200, "ar": 300}, "seed": 3}


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


def test_every_sentence_has_sacrebleus_own_sentence_scores(model, tmp_path):
    found = model.evaluate(SOURCES, REFERENCES, samples=0)
    found.save(tmp_path)
    lines = [json.loads(line) for line in (tmp_path / "sentences.jsonl").read_text().splitlines()]
    assert [r["line"] for r in lines] == list(range(len(SOURCES)))
    for r, hyp, ref in zip(lines, found.translations, REFERENCES):
        assert r["bleu"] == sacrebleu.sentence_bleu(hyp, [ref]).score
        assert r["chrf"] == sacrebleu.sentence_chrf(hyp, [ref]).score
    assert "eff:yes" in found.metrics["signatures"]["sentence_bleu"]


def test_bleus_tokenizer_is_chosen_and_signed(model):
    found = model.evaluate(SOURCES, REFERENCES, samples=0, bleu_tokenize="char")
    hyps = list(found.translations)
    assert found.metrics["bleu"] == sacrebleu.corpus_bleu(hyps, [REFERENCES], tokenize="char").score
    assert "tok:char" in found.metrics["signatures"]["bleu"] and "tok:char" in found.metrics["signatures"]["bleu_lc"]
    with pytest.raises(UserError, match="metrics.bleu_tokenize='moses': sacreBLEU has no such tokenizer"):
        model.evaluate(SOURCES, REFERENCES, bleu_tokenize="moses")


def test_a_baseline_given_as_translations_is_compared_by_the_paired_tests(model, tmp_path):
    greedy = list(model.translate(SOURCES, beam_size=1, max_len_b=3))  # a weaker system: short outputs
    found = model.evaluate(SOURCES, REFERENCES, samples=0, baseline=greedy, baseline_name="short", significance=QUICK)
    tested = found.metrics["significance"]
    expected = paired_tests(list(found.translations), greedy, REFERENCES, ("bs", "ar"), QUICK["samples"], 3)
    assert tested == {"baseline": "short", "seed": 3} | expected
    assert "against short (seed 3):" in found.summary() and "paired bootstrap p = " in found.summary()
    found.save(tmp_path)
    first = json.loads((tmp_path / "sentences.jsonl").read_text().splitlines()[0])
    assert first["baseline_bleu"] == sacrebleu.sentence_bleu(greedy[0], [REFERENCES[0]]).score


def test_a_baseline_given_as_a_model_decodes_with_its_own_settings(model):
    found = model.evaluate(SOURCES, REFERENCES, samples=0, baseline="multi30k-de-en", significance=QUICK, beam_size=1)
    same = found.metrics["significance"]["bs"]["bleu"]
    assert same["baseline"] == sacrebleu.corpus_bleu(list(model.translate(SOURCES)), [REFERENCES]).score
    assert same["system"] == found.metrics["bleu"]
    with pytest.raises(UserError, match="baseline multi30k-en-de translates en->de, this model de->en"):
        model.evaluate(SOURCES, REFERENCES, baseline="multi30k-en-de")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"baseline": ["one line"]}, "the baseline's translations \\(baseline\\) has 1 lines, the source has 6"),
        ({"baseline": "A dog ."}, "baseline"),
        ({"baseline": SOURCES, "significance": {"tests": ["t"]}}, "significance.tests"),
        ({"baseline": SOURCES, "significance": {"seed": "x"}}, "significance.seed='x'"),
        ({"baseline": SOURCES, "significance": {"rounds": 3}}, "significance.rounds is no setting"),
        ({"baseline": SOURCES, "significance": {"seed": -1}}, "significance.seed=-1: give a whole number"),
    ],
)
def test_a_comparison_that_cannot_run_is_one_line_before_any_translating(model, kwargs, message, monkeypatch):
    monkeypatch.setattr(type(model), "translate", lambda *a, **k: pytest.fail("translated before the check"))
    with pytest.raises(UserError, match=message) as e:
        model.evaluate(SOURCES, REFERENCES, samples=0, **kwargs)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "sources, references, message",
    [
        ([], [], "sentences: no sentences to evaluate"),  # sacreBLEU cannot score zero sentences
        (SOURCES, REFERENCES[:2], "references has 2 lines, the source has 6"),
    ],
)
def test_sentences_that_cannot_be_scored_are_refused_before_translating(
    model, monkeypatch, sources, references, message
):
    monkeypatch.setattr(type(model), "translate", lambda *a, **k: pytest.fail("it translated"))
    with pytest.raises(UserError, match=message):
        model.evaluate(sources, references, samples=0)
