import random
import sys

import pytest

import qkvmt.alignment.reference as ra
from qkvmt.alignment.links import alignment_scores
from qkvmt.errors import UserError


def reversed_pairs(n: int, seed: int = 0):
    """Pairs whose target is the source reversed through a dictionary, with their true links."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(30)]
    src = [[rng.choice(words) for _ in range(rng.randint(2, 8))] for _ in range(n)]
    tgt = [["T" + w[1:] for w in reversed(s)] for s in src]
    truth = [{(i, len(s) - 1 - i) for i in range(len(s))} for s in src]
    return [" ".join(s) for s in src], [" ".join(t) for t in tgt], truth


def test_eflomal_finds_the_links_of_a_corpus_whose_alignment_is_known():
    src, tgt, truth = reversed_pairs(400)
    forward, reverse = ra.Eflomal().directional(src, tgt, ("de", "en"))
    for links in (forward, reverse, ra.symmetrized_links(ra.Eflomal(), src, tgt, ("de", "en"), "intersection")):
        scores = alignment_scores(links, truth, truth)
        assert scores["precision"] > 0.9 and scores["recall"] > 0.9, scores


def test_links_are_computed_once_per_corpus_and_symmetrization(tmp_path, monkeypatch):
    src, tgt, _ = reversed_pairs(200)
    first = ra.cached_links(ra.Eflomal(), src, tgt, ("de", "en"), "grow-diag-final-and", tmp_path)
    monkeypatch.setattr(ra.Eflomal, "directional", lambda *a: pytest.fail("eflomal ran again for a cached corpus"))
    assert ra.cached_links(ra.Eflomal(), src, tgt, ("de", "en"), "grow-diag-final-and", tmp_path) == first
    with pytest.raises(pytest.fail.Exception):  # another symmetrization is another cache entry
        ra.cached_links(ra.Eflomal(), src, tgt, ("de", "en"), "intersection", tmp_path)
    assert [p.name for p in tmp_path.iterdir() if "tmp" in p.name] == []


def test_a_missing_eflomal_is_one_line_saying_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import eflomal now raises ImportError
    with pytest.raises(UserError, match=r"eflomal is not installed: pip install eflomal"):
        ra.reference_aligner("eflomal", "intersection", "reference_aligner")


def test_an_unknown_aligner_or_symmetrization_names_the_choices():
    with pytest.raises(UserError, match=r"reference_aligner='giza'.*eflomal"):
        ra.reference_aligner("giza", "intersection", "reference_aligner")
    with pytest.raises(UserError, match=r"symmetrization 'diag'.*grow-diag-final-and"):
        ra.reference_aligner("eflomal", "diag", "reference_aligner")


class Diagonal:
    """A made-up aligner: word i links to word i. What a new aligner must provide."""

    name = "diagonal"

    def require(self):
        return None

    def directional(self, src, tgt, langs):
        links = [{(i, i) for i in range(min(len(s.split()), len(t.split())))} for s, t in zip(src, tgt)]
        return links, links


def test_an_aligner_added_to_the_registry_serves_the_cache_and_every_command(tmp_path, monkeypatch):
    monkeypatch.setitem(ra.ALIGNERS, "diagonal", Diagonal)
    aligner = ra.reference_aligner("diagonal", "intersection", "module.alignment.aligner")
    links = ra.cached_links(aligner, ["a b c", "d e"], ["A B", "D E F"], ("de", "en"), "intersection", tmp_path)
    assert links == [{(0, 0), (1, 1)}, {(0, 0), (1, 1)}]
    # its own cache entry: eflomal's links of the same text are not taken for the diagonal's
    monkeypatch.setattr(ra.Eflomal, "directional", lambda self, s, t, lang: ([set()] * len(s), [set()] * len(s)))
    assert ra.cached_links(
        ra.Eflomal(), ["a b c", "d e"], ["A B", "D E F"], ("de", "en"), "intersection", tmp_path
    ) == [set(), set()]


def test_gold_pairs_join_the_aligners_text_once_even_when_training_already_holds_them():
    train_src, train_tgt = ["a b", "c d", "e  f"], ["A B", "C D", "E F"]
    gold_src, gold_tgt = ["x y", "e f", "c d"], ["Y X", "E F", "C D"]
    src, tgt, positions = ra.with_gold(train_src, train_tgt, gold_src, gold_tgt)
    assert (src, tgt) == (train_src + ["x y"], train_tgt + ["Y X"])  # "e  f" is "e f": eflomal splits on whitespace
    assert [(src[k], tgt[k]) for k in positions] == [("x y", "Y X"), ("e  f", "E F"), ("c d", "C D")]
    assert ra.with_gold(train_src, train_tgt, ["c d"], ["C X"])[2] == [3]  # the same source with another target is new


def test_eflomal_reads_lowercased_moses_tokens_and_each_token_remembers_its_whitespace_word():
    line, owner = ra.AlignerWords("de")("Das Haus, am See.")
    assert line == "das haus , am see ." and owner == [0, 1, 1, 2, 3, 3]


def test_links_between_tokens_become_links_between_the_whitespace_words_they_come_from():
    src, tgt, truth = reversed_pairs(400, seed=1)
    rng = random.Random(2)
    # punctuation glued to words, as in raw text: "w3," and "w3" are one word to eflomal
    src = [" ".join(w + rng.choice(["", "", ",", "."]) for w in s.split()) for s in src]
    tgt = [" ".join(rng.choice(["", "("]) + w for w in t.split()) for t in tgt]
    for links in ra.Eflomal().directional(src, tgt, ("de", "en")):
        assert all(i < len(s.split()) and j < len(t.split()) for pairs, s, t in zip(links, src, tgt) for i, j in pairs)
        scores = alignment_scores(links, truth, truth)
        assert scores["precision"] > 0.9 and scores["recall"] > 0.9, scores


def test_the_language_pair_is_part_of_the_link_cache_key(tmp_path, monkeypatch):
    src, tgt, _ = reversed_pairs(50)
    ra.cached_links(ra.Eflomal(), src, tgt, ("de", "en"), "intersection", tmp_path)
    monkeypatch.setattr(ra.Eflomal, "directional", lambda *a: pytest.fail("aligned again"))
    with pytest.raises(pytest.fail.Exception):  # Moses' rules differ by language: other links
        ra.cached_links(ra.Eflomal(), src, tgt, ("en", "de"), "intersection", tmp_path)
