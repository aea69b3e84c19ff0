"""Pairs of sources made by replacing words (qkvmt.studies.patching.pairs.swapped_word_pairs): whole words
only, the word just before one replaced as `before` says, lines without the word left out."""

from qkvmt.studies.patching.pairs import swapped_word_pairs

ARTICLES = {"Ein": "Eine", "der": "die", "einem": "einer"}


def test_each_word_and_the_article_before_it_are_replaced_and_other_lines_left_out():
    lines = ["Ein Mann schläft.", "Die Mannschaft spielt.", "der Mann, der lacht, und einem Mann", "Frau und Mann"]
    clean, corrupt = swapped_word_pairs(lines, {"Mann": "Frau"}, ARTICLES)
    assert clean == [lines[0], lines[2], lines[3]]  # no whole word "Mann" in Mannschaft
    assert corrupt == ["Eine Frau schläft.", "die Frau, der lacht, und einer Frau", "Frau und Frau"]


def test_without_articles_only_the_words_change():
    assert swapped_word_pairs(["Ein Mann lacht ."], {"Mann": "Frau", "lacht": "weint"}) == (
        ["Ein Mann lacht ."],
        ["Ein Frau weint ."],
    )


def test_only_after_keeps_the_lines_whose_every_word_follows_an_article():
    lines = ["Ein Mann schläft.", "der Mann und dem alten Mann", "der Mann, der lacht, und einem Mann"]
    clean, corrupt = swapped_word_pairs(lines, {"Mann": "Frau"}, ARTICLES, only_after=True)
    assert clean == [lines[0], lines[2]]  # "alten Mann": the article is not just before it
    assert corrupt == ["Eine Frau schläft.", "die Frau, der lacht, und einer Frau"]
