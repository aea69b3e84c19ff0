"""One joint BPE vocabulary for source and target, trained with HF `tokenizers`.

Metaspace pre-tokenization marks each word start with "▁" and keeps punctuation as its own
pre-token, so decoding is lossless (cased, detokenized text comes straight back) and every
subword knows whether it starts a word, which alignment needs.
"""

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = [PAD, BOS, EOS, UNK]  # ids 0..3, matching ModelConfig's pad/bos/eos ids
WORD_START = "▁"


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(replacement=WORD_START), pre_tokenizers.Punctuation()]
    )
    tok.decoder = decoders.Metaspace(replacement=WORD_START)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIALS, show_progress=False
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_or_train(path: Path, texts_fn, vocab_size: int, min_frequency: int = 2) -> Tokenizer:
    """Reuse the tokenizer saved with a run (on resume it must not change); train it otherwise."""
    path = Path(path)
    if path.exists():
        return Tokenizer.from_file(str(path))
    tok = train_bpe(texts_fn(), vocab_size, min_frequency)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tok.save(str(tmp))
    tmp.replace(path)
    return tok


def encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    """Subword ids of user text, the one way text becomes ids (training, translation, attention).

    Whitespace runs count as one space and the ends are stripped: Metaspace would otherwise
    make a "▁" token of every extra space, and a line of spaces would not be empty. A typed
    "<s>", "</s>" or "<pad>" is text, encoded piece by piece, never a control token.
    """
    tok.encode_special_tokens = True  # not saved with the tokenizer: set before every use
    return [e.ids for e in tok.encode_batch([" ".join(t.split()) for t in texts], add_special_tokens=False)]


def decode(tok: Tokenizer, ids: list[list[int]]) -> list[str]:
    return tok.decode_batch(ids, skip_special_tokens=True)
