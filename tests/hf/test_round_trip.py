"""A bundled model exported to Hugging Face (qkvmt export format=huggingface) and imported again: the
import reads what the export wrote, so the model translates as it did."""

from dataclasses import asdict

import pytest
import torch

import qkvmt
from qkvmt.export.to_huggingface import export_huggingface
from qkvmt.pipeline.export import export
from tests.conftest import compose_inference

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

LINES = [
    "Ein Mann fährt Fahrrad .",
    "Zwei Hunde spielen im Schnee auf einer Wiese .",
    "Eine Frau mit einem roten Hut liest ein Buch im Park .",
    "Kinder .",
]


def test_a_bundled_model_exported_and_imported_again_translates_identically(tmp_path):
    ours = qkvmt.load("multi30k-de-en", device="cpu")
    export_huggingface(ours.transformer, ours.tokenizer, ours.meta, tmp_path / "hf")
    back = qkvmt.load(tmp_path / "hf", device="cpu")
    assert back.transformer.cfg.sinusoidal_layout == "halves"  # Marian's table, the residual renamed to fit it
    # The folder says what transformers' generate does; our own decoding (lengths from the source's) is given.
    settings = asdict(ours.decoding())
    assert list(back.translate(LINES, **settings)) == list(ours.translate(LINES))
    assert back.translate(LINES, **settings).ids == ours.translate(LINES).ids


@pytest.mark.parametrize("separate", [False, True], ids=["one vocabulary", "separate vocabularies"])
def test_a_marian_folder_opened_in_qkvmt_exports_back_as_it_came(tmp_path, separate):
    """qkvmt export format=huggingface of an imported Marian model: transformers opens the folder with its
    own tokenizer files, its logits are the original model's, and it generates what the original does."""
    from tests.hf.test_tokenizers import TEXTS, whole_marian_folder

    folder, original, pad = whole_marian_folder(tmp_path / "opus-mt-de-en", separate)
    out = tmp_path / "out"
    export(compose_inference("export", f"ckpt_path={folder}", "format=huggingface", f"output_dir={out}"))
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (folder / name).read_bytes()
    back = transformers.MarianMTModel.from_pretrained(out, local_files_only=True).eval()
    batch = transformers.MarianTokenizer.from_pretrained(str(out))(TEXTS, return_tensors="pt", padding=True)
    targets = transformers.MarianTokenizer.from_pretrained(str(folder))(text_target=TEXTS, padding=True).input_ids
    tgt_in = torch.tensor([[pad] + row[:-1] for row in targets])
    with torch.no_grad():
        logits = [m(**batch, decoder_input_ids=tgt_in).logits for m in (back, original)]
        torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=0)
        assert back.generate(**batch).tolist() == original.generate(**batch).tolist()


def opened_folder(kind: str, folder):
    """A Hugging Face folder of `kind` (Marian's or M2M100's) and texts it tokenizes."""
    from tests.hf import test_languages, test_tokenizers

    if kind == "marian":
        test_tokenizers.whole_marian_folder(folder)
        return test_tokenizers.TEXTS
    test_languages.m2m100_folder(folder, num_beams=5)
    return test_languages.TEXTS


@pytest.mark.parametrize("kind", ["marian", "m2m100"])
def test_safetensors_of_an_opened_hugging_face_model_translates_as_the_folder_without_it(tmp_path, kind):
    """format=safetensors keeps the folder's tokenizer files in qkvmt.json: the model folder loads and
    translates as the Hugging Face folder does (a many-to-many one with its pair), once that folder is gone."""
    folder = tmp_path / kind
    texts = opened_folder(kind, folder)
    out = tmp_path / "out"
    export(compose_inference("export", f"ckpt_path={folder}", "format=safetensors", f"output_dir={out}"))
    expected = qkvmt.load(folder, device="cpu").translate(texts)
    folder.rename(tmp_path / "gone")
    back = qkvmt.load(out, device="cpu")
    translated = back.translate(texts)
    assert translated.ids == expected.ids and list(translated) == list(expected)
    assert not (out / "tokenizer.json").exists()


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("num_beams", [1, 5], ids=["greedy", "beam"])
def test_an_m2m100_folder_opened_in_qkvmt_exports_back_as_it_came(tmp_path, num_beams, tied):
    """qkvmt export format=huggingface of an imported M2M100 model (pre-LN): an M2M100 folder with its own
    tokenizer files, whose logits and generate outputs, target language forced, are the original's; with
    untied embeddings too, where M2M100 keeps a `shared` table it does not use."""
    from tests.hf.test_languages import TEXTS, m2m100_folder

    folder = tmp_path / "m2m100"
    tok, original = m2m100_folder(folder, num_beams, tied)
    out = tmp_path / "out"
    export(compose_inference("export", f"ckpt_path={folder}", "format=huggingface", f"output_dir={out}"))
    for name in ("sentencepiece.bpe.model", "vocab.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (folder / name).read_bytes()
    back = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, local_files_only=True).eval()
    assert back.config.model_type == "m2m_100" and back.generation_config.num_beams == num_beams
    tok = transformers.M2M100Tokenizer.from_pretrained(str(out))
    tok.src_lang, tok.tgt_lang = "de", "ru"
    batch = tok(TEXTS, text_target=TEXTS, return_tensors="pt", padding=True)
    labels = batch.pop("labels")
    start = torch.full_like(labels[:, :1], original.config.decoder_start_token_id)
    decoder_input_ids = torch.cat([start, labels[:, :-1]], dim=1)
    ru = tok.get_lang_id("ru")
    with torch.no_grad():
        logits = [m(**batch, decoder_input_ids=decoder_input_ids).logits for m in (back, original)]
        torch.testing.assert_close(logits[0], logits[1], atol=1e-5, rtol=0)
        generated = [m.generate(**batch, forced_bos_token_id=ru).tolist() for m in (back, original)]
    assert generated[0] == generated[1]
