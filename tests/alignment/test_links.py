"""Word alignment from attention, and AER against gold alignments; answers worked out by hand."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

from qkvmt.alignment.links import (
    alignment_scores,
    hard_links,
    parse_pharaoh,
    parse_talp_line,
    read_gold,
    to_pharaoh,
    word_groups,
    word_matrix,
)
from qkvmt.errors import UserError
from qkvmt.text.tokenizer import train_bpe

RWTH = os.environ.get("QKVMT_RWTH")


# --- word groups -------------------------------------------------------------------------------


def test_word_groups_join_subwords_and_skip_specials():
    tokens = ["<s>", "▁Ein", "▁Mann", "▁fähr", "t", "▁Fahr", "rad", ".", "</s>"]
    assert word_groups(tokens) == [[1], [2], [3, 4], [5, 6, 7]]


def test_word_groups_start_a_word_at_the_first_real_token_and_after_specials():
    # A leading <unk> has no "▁" but still starts a word; <unk> inside a word continues it.
    assert word_groups(["<s>", "<unk>", "x", "▁a", "<unk>", "</s>", "<pad>"]) == [[1, 2], [3, 4]]
    assert word_groups(["Haus", "▁und"]) == [[0], [1]]
    assert word_groups(["<s>", "</s>", "<pad>"]) == []


SENTENCES = [
    "Ein Mann fährt ein rotes Fahrrad.",
    "Zwei Hunde spielen im Schnee!",
    "Eine Frau liest ein Buch im Park.",
    "A man rides a red bicycle.",
    "Two dogs play in the snow!",
    "A woman reads a book in the park.",
    "Das Haus , und der Garten .",
    "The house , and the garden .",
    "Sicher - wenn ein Kind spielt, dann lacht es.",
    "We do not want to cherry-pick .",
    "Ein Mädchen (mit Hut) läuft.",
    "Kinder spielen im Haus und im Garten.",
    "Children play in the house and in the garden.",
    "Ein Hund läuft über die Wiese.",
    "A dog runs across the meadow.",
    "Der Mann trinkt Kaffee, die Frau Tee.",
    "The man drinks coffee, the woman tea.",
    "Ist das ein Vogel? Ja!",
    "Is that a bird? Yes!",
    "Drei Männer arbeiten auf der Straße.",
]


@pytest.fixture(scope="module")
def tok():
    return train_bpe(SENTENCES, vocab_size=120)


@pytest.mark.parametrize(
    "sentence",
    [
        "Ein Mann fährt ein rotes Fahrrad.",
        "Das Haus , und der Garten .",  # pre-tokenized: "," and "." are words of their own
        "Sicher - wenn ein Kind spielt, dann lacht es.",  # a lone hyphen is a word
        "We do not want to cherry-pick .",  # a hyphenated word is one word
        "Ein Mädchen (mit Hut) läuft.",  # "(mit" and "Hut)" are one word each
        "Ein Zebra frisst €uro-Gras !",  # unseen characters become <unk> inside words
    ],
)
def test_word_groups_match_whitespace_words_with_a_trained_tokenizer(tok, sentence):
    enc = tok.encode(sentence, add_special_tokens=False)
    tokens = ["<s>"] + enc.tokens + ["</s>"]
    groups = word_groups(tokens)
    words = sentence.split()
    assert len(groups) == len(words)
    if "<unk>" not in tokens:
        # Each group spells its word exactly, so the boundaries (not only the count) are right.
        assert ["".join(tokens[p] for p in g).lstrip("▁") for g in groups] == words


# --- word matrix and hard links ---------------------------------------------------------------


def test_word_matrix_sums_source_pieces_means_target_pieces_and_drops_eos():
    # Source tokens: ▁A(0) ▁bi(1) ke(2) </s>(3) -> words [[0], [1, 2]].
    # Target tokens: ▁Fahr(0) rad(1) ▁x(2)      -> words [[0, 1], [2]].
    w = np.array(
        [
            [0.1, 0.2, 0.3, 0.4],
            [0.3, 0.1, 0.1, 0.5],
            [0.0, 0.0, 0.1, 0.9],
        ]
    )
    # Summed over source pieces: rows [0.1, 0.5], [0.3, 0.2], [0.0, 0.1] (EOS column gone).
    # Target word 0 = mean of rows 0 and 1: [(0.1+0.3)/2, (0.5+0.2)/2] = [0.2, 0.35].
    # Target word 1 = row 2: [0.0, 0.1].
    m = word_matrix(w, tgt_groups=[[0, 1], [2]], src_groups=[[0], [1, 2]])
    np.testing.assert_allclose(m, [[0.2, 0.35], [0.0, 0.1]])
    # EOS held most mass in every row, yet the links go to words: (1, 0) and (1, 1).
    assert hard_links(m) == {(1, 0), (1, 1)}


def test_word_matrix_rejects_positions_outside_the_weights():
    with pytest.raises(ValueError, match="outside"):
        word_matrix(np.ones((2, 2)), [[0], [1]], [[0, 2]])


def test_hard_links_take_the_row_argmax_and_skip_zero_rows():
    m = np.array([[0.1, 0.7, 0.2], [0.0, 0.0, 0.0], [0.5, 0.1, 0.4], [0.0, 0.2, 0.3]])
    # Row 0 -> source 1; row 1 all zero -> no link; row 2 -> source 0; row 3 -> source 2.
    assert hard_links(m) == {(1, 0), (0, 2), (2, 3)}


def test_pharaoh_round_trip_and_sorting():
    # Sorted by source, then target: 2-0 comes after 0-1 although its target index is smaller.
    links = {(2, 0), (0, 3), (1, 2), (0, 1)}
    line = to_pharaoh(links)
    assert line == "0-1 0-3 1-2 2-0"
    assert parse_pharaoh(line) == links
    assert to_pharaoh(set()) == "" and parse_pharaoh("  ") == set()
    with pytest.raises(ValueError, match="1p2"):
        parse_pharaoh("0-0 1p2")


# --- AER ----------------------------------------------------------------------------------------


def test_perfect_alignment_has_aer_zero():
    gold = [{(0, 0), (1, 1)}, {(0, 1), (1, 0), (2, 2)}]
    scores = alignment_scores(gold, gold, gold)
    assert scores["aer"] == 0.0 and scores["precision"] == 1.0 and scores["recall"] == 1.0


def test_alignment_disjoint_from_possible_has_aer_one():
    sure = [{(0, 0)}, {(1, 1)}]
    possible = [{(0, 0), (0, 1)}, {(1, 1)}]
    hyp = [{(1, 0)}, {(0, 0), (1, 0)}]
    scores = alignment_scores(hyp, sure, possible)
    assert scores["aer"] == 1.0 and scores["precision"] == 0.0 and scores["recall"] == 0.0


def test_corpus_level_aer_with_possible_links():
    sure = [{(0, 0), (1, 1)}, {(0, 0)}, {(2, 1)}]
    possible = [{(0, 0), (1, 1), (1, 2)}, {(0, 0), (0, 1)}, {(2, 1)}]
    hyp = [{(0, 0), (1, 2), (2, 2)}, {(0, 1)}, {(2, 1), (0, 0)}]
    # Sentence 1: A∩S = {0-0} (1), A∩P = {0-0, 1-2} (2), |A| 3, |S| 2.
    # Sentence 2: A∩S = {} (0), A∩P = {0-1} (1), |A| 1, |S| 1.
    # Sentence 3: A∩S = {2-1} (1), A∩P = {2-1} (1), |A| 2, |S| 1.
    # Totals: |A∩S| 2, |A∩P| 4, |A| 6, |S| 4.
    # AER = 1 - (2 + 4) / (6 + 4) = 0.4; precision 4/6; recall 2/4.
    scores = alignment_scores(hyp, sure, possible)
    assert scores["aer"] == pytest.approx(0.4)
    assert scores["precision"] == pytest.approx(4 / 6)
    assert scores["recall"] == pytest.approx(0.5)
    assert (scores["hyp"], scores["sure"], scores["hyp_and_sure"], scores["hyp_and_possible"]) == (6, 4, 2, 4)
    # Corpus level is not the mean of sentence AERs (1 - 3/5, 1 - 1/2, 1 - 2/3 -> mean 0.422...).
    assert scores["aer"] != pytest.approx(np.mean([0.4, 0.5, 1 / 3]))


def test_sure_links_count_as_possible_even_if_missing_from_p():
    # P given without its sure link: with P ∪ S, A = {0-0} gives AER 1 - (1 + 1)/(1 + 1) = 0.
    assert alignment_scores([{(0, 0)}], [{(0, 0)}], [set()])["aer"] == 0.0


def test_empty_hypothesis_and_empty_gold():
    scores = alignment_scores([set()], [{(0, 0)}], [{(0, 0)}])
    # AER = 1 - 0 / (0 + 1) = 1; precision defined as 0.0 for an empty hypothesis.
    assert scores["aer"] == 1.0 and scores["precision"] == 0.0 and scores["recall"] == 0.0
    with pytest.raises(ValueError, match="no sure links"):
        alignment_scores([{(0, 0)}], [set()], [{(0, 0)}])
    with pytest.raises(ValueError, match="counts differ"):
        alignment_scores([set()], [], [])


# --- TALP gold files -----------------------------------------------------------------------------


def test_parse_talp_line_is_zero_based_with_sure_in_possible():
    sure, possible = parse_talp_line("1-1 2p3 3-2 ")
    assert sure == {(0, 0), (2, 1)}
    assert possible == {(0, 0), (1, 2), (2, 1)}
    assert parse_talp_line("") == (set(), set())
    with pytest.raises(ValueError, match="1-based"):
        parse_talp_line("0-1")


def write_gold(root: Path, de: list[str], en: list[str], talp: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, lines in (("de", de), ("en", en), ("alignment.talp", talp)):
        (root / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root


DE = ["Das Haus ist klein .", "Wir glauben nicht ."]
EN = ["The house is small .", "We do not believe ."]
TALP = ["1-1 2-2 3-3 4-4 5-5", "1-1 2-4 2p2 3-3 4-5 "]


def test_read_gold_converts_to_zero_based(tmp_path):
    gold = read_gold(write_gold(tmp_path / "g", DE, EN, TALP))
    assert gold.src == DE and gold.tgt == EN and len(gold) == 2
    assert gold.sure[0] == {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)}
    assert gold.sure[1] == {(0, 0), (1, 3), (2, 2), (3, 4)}
    assert gold.possible[1] == gold.sure[1] | {(1, 1)}
    assert all(s <= p for s, p in zip(gold.sure, gold.possible))


def test_read_gold_swaps_pairs_for_english_to_german(tmp_path):
    gold = read_gold(write_gold(tmp_path / "g", DE, EN, TALP), src_lang="en", tgt_lang="de")
    assert gold.src == EN and gold.tgt == DE
    # German 2 -> English 4 (1-based) becomes (en 3, de 1) 0-based; possible 2p2 becomes (1, 1).
    assert gold.sure[1] == {(0, 0), (3, 1), (2, 2), (4, 3)}
    assert gold.possible[1] == gold.sure[1] | {(1, 1)}


def test_read_gold_missing_folder_and_file(tmp_path):
    with pytest.raises(UserError, match="nowhere"):
        read_gold(tmp_path / "nowhere")
    root = write_gold(tmp_path / "g", DE, EN, TALP)
    (root / "en").unlink()
    with pytest.raises(
        UserError, match=r"lacks en: a gold folder for the checkpoint's pair de->en .* \(it has: alignment\.talp, de\)"
    ):
        read_gold(root)


FR = ["La maison est petite .", "Nous ne croyons pas ."]
FR_EN = ["1-1 2-2 3-3 4-4 5-5", "1-1 2-3 3-4 3p3 4-4 5-5"]  # first index: French


@pytest.mark.parametrize("first", ["fr", "en"])
def test_a_gold_set_of_another_pair_reads_with_either_side_first(tmp_path, first):
    """gold_first names the side the first index counts: the same links, written either way
    round, come back as (source word, target word) of an fr->en checkpoint."""
    talp = (
        FR_EN
        if first == "fr"
        else [
            " ".join(
                f"{j}{sep}{i}"
                for i, sep, j in (re.fullmatch(r"(\d+)([-p])(\d+)", item).groups() for item in line.split())
            )
            for line in FR_EN
        ]
    )
    root = tmp_path / "g"
    for name, lines in (("fr", FR), ("en", EN), ("alignment.talp", talp)):
        root.mkdir(exist_ok=True)
        (root / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    gold = read_gold(root, src_lang="fr", tgt_lang="en", talp_first=first)
    assert gold.src == FR and gold.tgt == EN
    assert gold.sure[1] == {(0, 0), (1, 2), (2, 3), (3, 3), (4, 4)} and gold.possible[1] == gold.sure[1] | {(2, 2)}


def test_a_gold_set_that_does_not_fit_the_pair_names_the_setting_and_the_files(tmp_path):
    root = write_gold(tmp_path / "g", DE, EN, TALP)
    with pytest.raises(
        UserError,
        match=r"gold_first='de' is not a language of the checkpoint's pair fr->en: set gold_first=fr or gold_first=en",
    ):
        read_gold(root, src_lang="fr", tgt_lang="en")  # gold_first left at RWTH's de
    with pytest.raises(UserError, match=r"lacks fr: .*\(it has: alignment\.talp, de, en\); a gold set of another pair"):
        read_gold(root, src_lang="fr", tgt_lang="en", talp_first="en")


def test_read_gold_line_count_mismatch_names_all_counts(tmp_path):
    root = write_gold(tmp_path / "g", DE, EN[:1], TALP + ["1-1"])
    with pytest.raises(UserError) as err:
        read_gold(root)
    assert "de: 2" in str(err.value) and "en: 1" in str(err.value) and "alignment.talp: 3" in str(err.value)


def test_read_gold_non_utf8_names_file_and_line(tmp_path):
    root = write_gold(tmp_path / "g", DE, EN, TALP)
    (root / "en").write_bytes(EN[0].encode() + b"\n" + "Wir glauben nicht .".encode("latin-1") + b" \xe4\n")
    with pytest.raises(UserError, match=r"g/en, line 2: not valid UTF-8"):
        read_gold(root)


def test_read_gold_malformed_item_names_file_and_line(tmp_path):
    root = write_gold(tmp_path / "g", DE, EN, [TALP[0], "1-1 2x4"])
    with pytest.raises(UserError, match=r"alignment\.talp, line 2: malformed link '2x4'"):
        read_gold(root)


def test_read_gold_index_out_of_range_names_index_and_word_counts(tmp_path):
    # Line 1 has 5 German and 5 English words; English index 6 does not exist.
    root = write_gold(tmp_path / "g", DE, EN, ["1-1 2-6", TALP[1]])
    with pytest.raises(UserError, match=r"alignment\.talp, line 1: link 2-6 .* 5 de words and 5 en words"):
        read_gold(root)


@pytest.mark.skipif(not RWTH, reason="real RWTH alignments not configured: set QKVMT_RWTH (.ci/run does)")
def test_rwth_gold_reads_completely():
    gold = read_gold(Path(RWTH))
    assert len(gold) == len(gold.tgt) == len(gold.sure) == len(gold.possible) == 508
    for src, tgt, sure, possible in zip(gold.src, gold.tgt, gold.sure, gold.possible):
        assert sure <= possible
        n_src, n_tgt = len(src.split()), len(tgt.split())
        assert all(0 <= i < n_src and 0 <= j < n_tgt for i, j in possible)
    assert sum(map(len, gold.sure)) > 0
