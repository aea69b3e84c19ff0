"""The joint BPE tokenizer."""

import pytest

from qkvmt.errors import UserError
from qkvmt.text.tokenizer import SPECIALS, decode, encode, load_or_train, train_bpe

TEXTS = ["Ein Mann fährt Fahrrad.", "A man rides a bicycle.", "Zwei Hunde spielen im Schnee!", "Two dogs play."] * 20


def test_special_ids_come_first():
    tok = train_bpe(TEXTS, vocab_size=100)
    assert [tok.token_to_id(s) for s in SPECIALS] == [0, 1, 2, 3]


def test_decoding_restores_cased_detokenized_text():
    tok = train_bpe(TEXTS, vocab_size=100)
    assert decode(tok, encode(tok, TEXTS[:4])) == TEXTS[:4]


def test_saved_tokenizer_is_reused_not_retrained(tmp_path):
    path = tmp_path / "tokenizer.json"
    first = load_or_train(path, lambda: TEXTS, vocab_size=100)
    again = load_or_train(path, lambda: ["ganz andere Wörter"] * 50, vocab_size=100)
    assert again.to_str() == first.to_str()


def test_a_given_tokenizer_is_kept_and_a_run_folder_never_switches_between_given_and_trained(tmp_path):
    given = train_bpe(TEXTS, vocab_size=80)
    path = tmp_path / "tokenizer.json"
    kept = load_or_train(path, lambda: pytest.fail("a given tokenizer is not trained"), 100, given=given)
    assert kept.to_str() == given.to_str() == load_or_train(path, lambda: TEXTS, 100, given=given).to_str()
    with pytest.raises(UserError, match=r"the tokenizer there is another model's \(init_from\), this run asks for one"):
        load_or_train(path, lambda: TEXTS, vocab_size=100)
    with pytest.raises(UserError, match="the tokenizer there is another model's"):
        load_or_train(path, lambda: TEXTS, 100, given=train_bpe(TEXTS, vocab_size=60))
    trained = tmp_path / "trained" / "tokenizer.json"
    load_or_train(trained, lambda: TEXTS, vocab_size=100)
    with pytest.raises(UserError, match="one trained on that run's data, this run asks for init_from's"):
        load_or_train(trained, lambda: TEXTS, 100, given=given)
