"""The joint BPE tokenizer."""

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
