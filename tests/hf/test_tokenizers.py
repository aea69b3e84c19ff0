"""Marian's SentencePiece pair behind qkvmt's tokenizer interface, against transformers' MarianTokenizer,
and a whole Marian folder (its tokenizer files beside random weights) through qkvmt.load and translate."""

import io
import json
import random

import pytest
import torch

import qkvmt
from qkvmt.hf.tokenizers import load_tokenizer
from qkvmt.text.tokenizer import decode, encode, encode_target
from tests.hf.folders import SMALL, randomized, saved

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

WORDS = {
    "de": "ein der die das Mann Frau Hund Katze läuft springt über unter Straße Wiese rot blau schnell".split(),
    "en": "a the man woman dog cat runs jumps over under street meadow red blue fast quickly".split(),
}
TEXTS = ["Ein Mann läuft über die Straße .", "die Katze springt", "Hund Hund , rot ? blau!", "unbekanntes Wort"]


def sentences(lang: str, n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS[lang]) for _ in range(rng.randint(3, 9))) + " ." for _ in range(n)]


def trained_spm(lines: list[str]) -> bytes:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=36,
        model_type="unigram",
        minloglevel=2,
    )
    return model.getvalue()


def marian_folder(folder, separate: bool = False, texts: dict[str, list[str]] | None = None):
    """source.spm, target.spm, vocab.json (target_vocab.json) as Marian's converter writes them: </s> 0,
    <unk> 1, every other piece of both models, <pad> last; trained on `texts` (language -> lines), by
    default on sentences of WORDS."""
    folder.mkdir(parents=True, exist_ok=True)
    pieces = {}
    for name, lang in (("source.spm", "de"), ("target.spm", "en")):
        data = trained_spm(texts[lang] if texts else sentences(lang))
        (folder / name).write_bytes(data)
        proc = spm.SentencePieceProcessor(model_proto=data)
        pieces[lang] = [proc.id_to_piece(i) for i in range(proc.get_piece_size())]

    def vocab(ps):
        names = ["</s>", "<unk>"] + [p for p in dict.fromkeys(ps) if p not in ("<s>", "</s>", "<unk>")]
        return {p: i for i, p in enumerate(names + ["<pad>"])}

    if separate:
        (folder / "vocab.json").write_text(json.dumps(vocab(pieces["de"])))
        (folder / "target_vocab.json").write_text(json.dumps(vocab(pieces["en"])))
    else:
        (folder / "vocab.json").write_text(json.dumps(vocab(pieces["de"] + pieces["en"])))
    config = {"source_lang": "de", "target_lang": "en", "separate_vocabs": separate}
    (folder / "tokenizer_config.json").write_text(json.dumps(config | {"tokenizer_class": "MarianTokenizer"}))
    return folder


@pytest.mark.parametrize("separate", [False, True], ids=["one vocabulary", "separate vocabularies"])
def test_marian_ids_and_text_match_marian_tokenizer(tmp_path, separate):
    folder = marian_folder(tmp_path / "tok", separate)
    theirs = transformers.MarianTokenizer.from_pretrained(str(folder))
    ours = load_tokenizer(folder)
    eos = theirs.eos_token_id
    assert [row + [eos] for row in encode(ours, TEXTS)] == theirs(TEXTS).input_ids
    assert [row + [eos] for row in encode_target(ours, TEXTS)] == theirs(text_target=TEXTS).input_ids
    targets = theirs(text_target=TEXTS).input_ids
    assert decode(ours, targets) == theirs.batch_decode(targets, skip_special_tokens=True)
    assert ours.get_vocab() == theirs.get_vocab() if not separate else ours.get_vocab_size() == theirs.vocab_size


def whole_marian_folder(folder, separate: bool = False, texts: dict[str, list[str]] | None = None, **random):
    """A Marian folder as the hub holds one: tokenizer files and a random model of their vocabulary (or
    vocabularies: both of one size here, so <pad> has one id); and the model and its <pad>. `random`:
    folders.randomized's settings (eos_bias 1.0 unless given)."""
    folder = marian_folder(folder, separate, texts)
    vocab = json.loads((folder / "vocab.json").read_text())
    pad = vocab["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, **SMALL
    )
    if separate:
        config.share_encoder_decoder_embeddings = False
        assert json.loads((folder / "target_vocab.json").read_text())["<pad>"] == pad
    hf = randomized(transformers.MarianMTModel(config), **({"eos_bias": 1.0} | random))
    saved(hf, folder, bad_words_ids=[[pad]], forced_eos_token_id=0, max_length=12, num_beams=4, early_stopping=False)
    return folder, hf, pad


@pytest.mark.parametrize("separate", [False, True], ids=["one vocabulary", "separate vocabularies"])
def test_marian_folder_loads_and_translates_as_generate(tmp_path, separate):
    folder, hf, pad = whole_marian_folder(tmp_path / "opus-mt-de-en", separate)
    model = qkvmt.load(folder, device="cpu")
    out = model.translate(TEXTS)
    theirs = transformers.MarianTokenizer.from_pretrained(str(folder))
    batch = theirs(TEXTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = hf.generate(**batch)
    assert list(out) == theirs.batch_decode(expected, skip_special_tokens=True)
    assert out.ids == [[t for t in row[1:] if t not in (pad, 0)] for row in expected.tolist()]
    # A view reads the imported model's own attention, the given target cut with target.spm and its tokens
    # named by the target's vocabulary.
    seen = model.attention(TEXTS[0], "the man runs .")
    assert seen.tgt_tokens[1:] == theirs.convert_ids_to_tokens(theirs(text_target="the man runs .").input_ids[:-1])
    assert len(seen.src_tokens) == len(theirs(TEXTS[0]).input_ids)
