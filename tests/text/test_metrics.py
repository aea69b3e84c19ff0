"""Scores come from sacreBLEU, with signatures."""

import pytest
import sacrebleu
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

from qkvmt.errors import UserError
from qkvmt.text.metrics import score, score_tokenized_lowercased, sentence_scores

HYP = ["A man rides a bike.", "Two dogs play in the SNOW."]
REF = ["A man is riding a bike.", "Two dogs play in the snow."]


def test_scores_match_sacrebleu_and_carry_signatures():
    s = score(HYP, REF)
    assert s["bleu"] == sacrebleu.corpus_bleu(HYP, [REF]).score
    assert s["chrf"] == sacrebleu.corpus_chrf(HYP, [REF]).score
    assert s["bleu_lc"] == sacrebleu.corpus_bleu(HYP, [REF], lowercase=True).score > s["bleu"]
    assert s["signatures"]["bleu"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "case:lc" in s["signatures"]["bleu_lc"]


def test_sentence_scores_are_sacrebleus_sentence_scores_with_signatures():
    scores, signatures = sentence_scores(HYP, REF)
    for (h, r), s in zip(zip(HYP, REF), scores):
        assert s["bleu"] == sacrebleu.sentence_bleu(h, [r]).score  # effective order, as sacreBLEU's own
        assert s["chrf"] == sacrebleu.sentence_chrf(h, [r]).score
    assert "eff:yes" in signatures["sentence_bleu"] and "nc:6" in signatures["sentence_chrf"]
    assert sentence_scores([], []) == ([], {})


@pytest.mark.parametrize("scoring", [score, sentence_scores, lambda h, r: score_tokenized_lowercased(h, r, "en")])
def test_scoring_leaves_no_lines_in_sacrebleus_memo(scoring):
    # sacreBLEU memoizes every tokenized line class-wide; a training run scores new lines at each
    # validation, and the memo kept them all: the processes' heap grew at every validation
    memos = [Tokenizer13a.__call__, TokenizerRegexp.__call__]
    sacrebleu.corpus_bleu(HYP, [REF])  # sacreBLEU's own call fills them
    assert all(m.cache_info().currsize > 0 for m in memos)
    scoring(HYP, REF)
    assert [m.cache_info().currsize for m in memos] == [0, 0]


def test_zero_sentences_are_a_user_error_not_sacrebleus_index_error():
    with pytest.raises(UserError, match="no sentences to score"):
        score([], [])
