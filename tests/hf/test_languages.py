"""M2M100's tokenizer, a language token first on each side, against transformers' M2M100Tokenizer; and a
whole M2M100 folder through qkvmt.load(src_lang=, tgt_lang=) and translate, against generate."""

import io
import json
import random

import pytest
import torch
from hydra.utils import instantiate

import qkvmt
from qkvmt.errors import UserError
from qkvmt.hf.tokenizers import load_tokenizer
from qkvmt.pipeline.translate import translate
from qkvmt.text.tokenizer import decode, encode, encode_target
from tests.conftest import compose_inference
from tests.hf.folders import SMALL, randomized, saved
from tests.hf.test_tokenizers import WORDS

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

TEXTS = ["Ein Mann läuft über die Straße .", "the cat jumps", "Hund , rot ? blau!"]


def m2m100_tokenizer_folder(folder, listed: bool = True):
    """sentencepiece.bpe.model and vocab.json as fairseq numbers them (<s>, <pad>, </s>, <unk>, pieces), saved
    by M2M100Tokenizer with wmt21's eight languages, which tokenizer_config.json lists as hub folders do
    (transformers 5 writes no list, and then does not skip the language tokens when it decodes)."""
    rng = random.Random(0)
    words = WORDS["de"] + WORDS["en"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + " ." for _ in range(400)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=60, model_type="bpe", minloglevel=2
    )
    folder.mkdir(parents=True)
    (folder / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    proc = spm.SentencePieceProcessor(model_proto=model.getvalue())
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in (proc.id_to_piece(i) for i in range(proc.get_piece_size())):
        vocab.setdefault(piece, len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tok = transformers.M2M100Tokenizer(
        vocab_file=str(folder / "vocab.json"),
        spm_file=str(folder / "sentencepiece.bpe.model"),
        src_lang="de",
        tgt_lang="en",
        language_codes="wmt21",
    )
    tok.save_pretrained(str(folder))
    if listed:  # as hub folders list them; else as transformers 5 saves it, naming the table (wmt21) alone
        config = json.loads((folder / "tokenizer_config.json").read_text())
        config["additional_special_tokens"] = [f"__{code}__" for code in tok.lang_code_to_id]
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return transformers.M2M100Tokenizer.from_pretrained(str(folder))  # which reads the languages listed


@pytest.mark.parametrize("listed", [True, False], ids=["languages listed", "as transformers 5 saves it"])
def test_ids_and_text_match_m2m100_tokenizer(tmp_path, listed):
    theirs = m2m100_tokenizer_folder(tmp_path / "tok", listed)
    assert ("additional_special_tokens" in (tmp_path / "tok" / "tokenizer_config.json").read_text()) == listed
    ours = load_tokenizer(tmp_path / "tok")
    eos = theirs.eos_token_id
    assert [row + [eos] for row in encode(ours, TEXTS)] == theirs(TEXTS).input_ids  # __de__ first
    assert [row + [eos] for row in encode_target(ours, TEXTS)] == theirs(text_target=TEXTS).input_ids  # __en__
    ids = theirs(text_target=TEXTS).input_ids
    # the target's language token first, which transformers 5 keeps in the text where no list names it special
    assert decode(ours, ids) == theirs.batch_decode([row[1:] for row in ids], skip_special_tokens=True)
    assert ours.with_languages("ru", "ja").language_id("ja") == theirs.get_lang_id("ja")
    with pytest.raises(UserError, match="tgt_lang='xx' is not one of its languages"):
        ours.with_languages(None, "xx")


def test_a_folder_that_names_no_languages_and_no_table_of_them_is_one_line(tmp_path):
    m2m100_tokenizer_folder(tmp_path / "tok", listed=False)
    path = tmp_path / "tok" / "tokenizer_config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"language_codes": "wmt99"}))
    with pytest.raises(UserError, match=r"tokenizer_config.json: no language tokens .* language_codes=\"wmt99\""):
        load_tokenizer(tmp_path / "tok")


@pytest.mark.parametrize("token", [{"lang": "de"}, 5], ids=["an object without content", "a number"])
def test_a_listed_special_token_that_is_no_text_is_one_line(tmp_path, token):
    """An object without "content" was a KeyError; a number was taken as its digits."""
    m2m100_tokenizer_folder(tmp_path / "tok")
    path = tmp_path / "tok" / "tokenizer_config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps(config | {"additional_special_tokens": [token, *config["additional_special_tokens"]]}))
    with pytest.raises(UserError, match=r"tokenizer_config.json: additional_special_tokens=.* is not a token"):
        load_tokenizer(tmp_path / "tok")


def m2m100_folder(folder, num_beams: int = 1, tied: bool = True):
    """A whole M2M100 folder: its tokenizer files and a random model of their vocabulary (its embeddings and
    output layer `tied` or not); and both."""
    tok = m2m100_tokenizer_folder(folder)
    vocab = len(tok.get_vocab()) + 8  # the languages after vocab.json, then fairseq's eight made-up words
    config = transformers.M2M100Config(vocab_size=vocab, activation_function="relu", tie_word_embeddings=tied, **SMALL)
    hf = randomized(transformers.M2M100ForConditionalGeneration(config))
    generation = dict(bad_words_ids=[[1]], forced_eos_token_id=2, max_length=12, num_beams=num_beams)
    saved(hf, folder, **generation)
    return tok, hf


@pytest.mark.parametrize("num_beams", [1, 5])
def test_m2m100_folder_translates_as_generate_with_the_target_language_forced(tmp_path, num_beams):
    folder = tmp_path / "m2m100"
    tok, hf = m2m100_folder(folder, num_beams)
    model = qkvmt.load(folder, device="cpu", src_lang="de", tgt_lang="ru")
    assert (model.meta.src_lang, model.meta.tgt_lang) == ("de", "ru")
    out = model.translate(TEXTS)
    tok.src_lang = "de"
    with torch.no_grad():
        expected = hf.generate(
            **tok(TEXTS, return_tensors="pt", padding=True), forced_bos_token_id=tok.get_lang_id("ru")
        )
    assert [row[0] for row in out.ids] == [tok.get_lang_id("ru")] * len(TEXTS)
    assert out.ids == [[t for t in row[1:] if t not in (1, 2)] for row in expected.tolist()]
    assert list(out) == tok.batch_decode(expected, skip_special_tokens=True)


def test_a_loaded_model_turns_to_another_pair_without_loading_again(tmp_path):
    folder = tmp_path / "m2m100"
    tok, _ = m2m100_folder(folder)
    model = qkvmt.load(folder, device="cpu")  # the folder's pair: de -> en
    other = model.pair(tgt_lang="ja")
    assert other.transformer is model.transformer and (other.meta.src_lang, other.meta.tgt_lang) == ("de", "ja")
    assert [row[0] for row in other.translate(TEXTS).ids] == [tok.get_lang_id("ja")] * len(TEXTS)
    assert [row[0] for row in model.translate(TEXTS).ids] == [tok.get_lang_id("en")] * len(TEXTS)
    assert other.translate(TEXTS).ids == qkvmt.load(folder, device="cpu", tgt_lang="ja").translate(TEXTS).ids


def test_commands_take_the_pair_and_default_to_the_folders(tmp_path):
    folder = tmp_path / "m2m100"
    m2m100_folder(folder)
    for pair, (src, tgt) in (((), ("de", "en")), (("src_lang=en", "tgt_lang=ja"), ("en", "ja"))):
        out = io.StringIO()
        cfg = compose_inference("translate", f"ckpt_path={folder}", "sentence='die Katze'", *pair)
        translate(cfg, stdout=out)  # with the command's own decoding settings, the target language forced all the same
        model = qkvmt.load(folder, device="cpu", src_lang=src, tgt_lang=tgt)
        expected = model.translate(["die Katze"], settings=instantiate(cfg.decode))
        assert expected.ids[0][0] == model.tokenizer.language_id(tgt)
        assert out.getvalue().splitlines() == list(expected)


NLLB_LANGUAGES = ["deu_Latn", "eng_Latn", "fra_Latn"]


def nllb_folder(folder, listed: bool = True):
    """An NLLB tokenizer folder (tokenizer.json, its languages listed in tokenizer_config.json unless not
    `listed`), as transformers' NllbTokenizer writes one from a SentencePiece model trained here; and that
    tokenizer as transformers opens the folder (without a list: with NLLB's 202 languages, as its own)."""
    rng = random.Random(1)
    words = WORDS["de"] + WORDS["en"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + " ." for _ in range(400)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=60, model_type="bpe", minloglevel=2
    )
    source = folder.parent / "spm"
    source.mkdir()
    (source / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    (source / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}))
    tok = transformers.AutoTokenizer.from_pretrained(str(source))
    tok.add_special_tokens({"additional_special_tokens": NLLB_LANGUAGES})
    tok.src_lang, tok.tgt_lang = "deu_Latn", "eng_Latn"
    tok.save_pretrained(str(folder))
    if not listed:
        config = json.loads((folder / "tokenizer_config.json").read_text())
        del config["extra_special_tokens"]
        (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return transformers.AutoTokenizer.from_pretrained(str(folder))


def test_nllb_tokenizer_json_with_its_languages_matches_nllb_tokenizer(tmp_path):
    theirs = nllb_folder(tmp_path / "nllb")
    ours = load_tokenizer(tmp_path / "nllb")
    eos = theirs.eos_token_id
    assert [row + [eos] for row in encode(ours, TEXTS)] == theirs(TEXTS).input_ids  # deu_Latn first
    assert [row + [eos] for row in encode_target(ours, TEXTS)] == theirs(text_target=TEXTS).input_ids  # eng_Latn
    ids = theirs(text_target=TEXTS).input_ids
    assert decode(ours, ids) == theirs.batch_decode(ids, skip_special_tokens=True)


def test_a_tokenizer_json_saved_after_a_padded_call_encodes_as_transformers_does(tmp_path):
    """transformers stores the padding (and truncation) of the last call in tokenizer.json; it pads a text
    only when a call asks, so each source's ids are its own, whatever the batch."""
    theirs = nllb_folder(tmp_path / "nllb")
    theirs(TEXTS, padding=True, truncation=True, max_length=6)
    theirs.save_pretrained(str(tmp_path / "padded"))
    stored = json.loads((tmp_path / "padded" / "tokenizer.json").read_text())
    assert stored["padding"] is not None and stored["truncation"] is not None  # what the folder holds
    ours = load_tokenizer(tmp_path / "padded")
    eos = theirs.eos_token_id
    assert [row + [eos] for row in encode(ours, TEXTS)] == theirs(TEXTS).input_ids
    assert [encode(ours, [text])[0] for text in TEXTS] == encode(ours, TEXTS)  # alone as in a batch


def test_an_nllb_folder_translates_as_generate(tmp_path):
    folder = tmp_path / "nllb"
    tok = nllb_folder(folder)
    config = transformers.M2M100Config(vocab_size=len(tok), activation_function="relu", **SMALL)  # NLLB's type
    hf = randomized(transformers.M2M100ForConditionalGeneration(config))
    saved(hf, folder, bad_words_ids=[[1]], forced_eos_token_id=2, max_length=12, num_beams=5)
    model = qkvmt.load(folder, device="cpu", tgt_lang="fra_Latn")
    out = model.translate(TEXTS)
    fra = tok.convert_tokens_to_ids("fra_Latn")
    with torch.no_grad():
        expected = hf.generate(**tok(TEXTS, return_tensors="pt", padding=True), forced_bos_token_id=fra)
    assert out.ids == [[t for t in row[1:] if t not in (1, 2)] for row in expected.tolist()]
    assert list(out) == tok.batch_decode(expected, skip_special_tokens=True)


def test_an_nllb_folder_that_lists_no_languages_translates_as_generate(tmp_path):
    """A tokenizer_config.json of NllbTokenizer without its list of languages: transformers takes NLLB's own
    (those tokenizer.json holds keep their ids); so does qkvmt, and forces the target language."""
    folder = tmp_path / "nllb"
    tok = nllb_folder(folder, listed=False)
    assert 'special_tokens"' not in (folder / "tokenizer_config.json").read_text()
    fra = tok.convert_tokens_to_ids("fra_Latn")
    config = transformers.M2M100Config(vocab_size=fra + 1, activation_function="relu", **SMALL)
    hf = randomized(transformers.M2M100ForConditionalGeneration(config))
    saved(hf, folder, bad_words_ids=[[1]], forced_eos_token_id=2, max_length=12, num_beams=5)
    model = qkvmt.load(folder, device="cpu", tgt_lang="fra_Latn")
    assert [row + [tok.eos_token_id] for row in encode(model.tokenizer, TEXTS)] == tok(TEXTS).input_ids
    out = model.translate(TEXTS)
    with torch.no_grad():
        expected = hf.generate(**tok(TEXTS, return_tensors="pt", padding=True), forced_bos_token_id=fra)
    assert out.ids == [[t for t in row[1:] if t not in (1, 2)] for row in expected.tolist()]
    assert list(out) == tok.batch_decode(expected, skip_special_tokens=True)
