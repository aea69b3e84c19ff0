"""Every tool on imported Marian models: on models of OPUS-MT-base's shape (6+6 layers, d=512, 8 heads,
a 58k vocabulary; random weights, tokenizers trained in the test) translate, evaluate, inspect,
intervene (whose swap identities hold), lens, and align against gold links with two imported models,
one per direction, symmetrized; on a small one, what takes many passes per sentence at that size
(the explorer's requests, with every signal of the sentence view, evaluate's report, heads and
faithfulness)."""

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import qkvmt
from qkvmt.explore.session import Explorer
from qkvmt.pipeline.align import align
from qkvmt.pipeline.evaluate import evaluate
from qkvmt.pipeline.faithfulness import faithfulness
from qkvmt.pipeline.heads import heads
from tests.conftest import compose_inference
from tests.hf.folders import randomized, saved
from tests.hf.test_tokenizers import marian_folder, whole_marian_folder

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

VOCAB = 58_101  # opus-mt-de-en's
BASE = dict(
    d_model=512,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=8,
    decoder_attention_heads=8,
    encoder_ffn_dim=2048,
    decoder_ffn_dim=2048,
    max_position_embeddings=512,
    activation_function="swish",
)
SOURCES = ["Ein Mann läuft über die Straße .", "die Katze springt über den Hund"]
TARGETS = ["a man runs over the street .", "the cat jumps over the dog"]


def base_folder(folder: Path, src: str, tgt: str) -> Path:
    """An OPUS-MT-base-shaped Marian folder translating src -> tgt: SentencePiece models trained in the test,
    vocab.json filled up to opus-mt-de-en's size (<pad> last, as Marian's converter writes it)."""
    marian_folder(folder)
    (folder / "source.spm").rename(folder / "tmp.spm")
    if src == "en":  # the reverse direction: the sides trade places
        (folder / "target.spm").rename(folder / "source.spm")
        (folder / "tmp.spm").rename(folder / "target.spm")
    else:
        (folder / "tmp.spm").rename(folder / "source.spm")
    vocab = json.loads((folder / "vocab.json").read_text())
    del vocab["<pad>"]
    vocab |= {f"▁filler{i}": len(vocab) + i for i in range(VOCAB - 1 - len(vocab))}
    vocab["<pad>"] = pad = VOCAB - 1
    (folder / "vocab.json").write_text(json.dumps(vocab))
    tc = {"source_lang": src, "target_lang": tgt, "separate_vocabs": False, "tokenizer_class": "MarianTokenizer"}
    (folder / "tokenizer_config.json").write_text(json.dumps(tc))
    config = transformers.MarianConfig(vocab_size=VOCAB, pad_token_id=pad, decoder_start_token_id=pad, **BASE)
    with torch.device("cpu"):
        hf = randomized(transformers.MarianMTModel(config), eos_bias=3.0)  # short outputs: a fast test
    return saved(hf, folder, bad_words_ids=[[pad]], forced_eos_token_id=0, max_length=24, num_beams=5)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("opus-mt")
    return base_folder(root / "de-en", "de", "en"), base_folder(root / "en-de", "en", "de")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small Marian folder (tests/hf/test_tokenizers.py's) with its SentencePiece tokenizer."""
    return whole_marian_folder(tmp_path_factory.mktemp("small") / "opus-mt-de-en")[0]


@pytest.fixture(scope="module")
def model(folders):
    return qkvmt.load(folders[0], device="cpu")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A few lines to score: Multi30k's test set where it is configured, else the sentences above."""
    root, out = os.environ.get("QKVMT_MULTI30K"), tmp_path_factory.mktemp("text")
    for lang, fallback in (("de", SOURCES), ("en", TARGETS)):
        lines = (
            gzip.open(Path(root) / f"test_2016_flickr.{lang}.gz", "rt").read().splitlines()[:3] if root else fallback
        )
        (out / f"x.{lang}").write_text("\n".join(lines) + "\n")
    return out / "x.de", out / "x.en"


def test_the_model_is_opus_mt_base_shaped(model):
    c = model.transformer.cfg
    assert (c.d_model, c.encoder_layers, c.decoder_layers, c.n_heads, c.vocab_size) == (512, 6, 6, 8, VOCAB)


@pytest.mark.parametrize("size", ["base", "small"])
def test_evaluate_scores_a_test_set_with_sacrebleu(folders, small, files, tmp_path, size):
    """At base size without the report's maps, whose every signal takes minutes a sentence on 2 cores."""
    folder, report = (folders[0], "attention.num_samples=0") if size == "base" else (small, "attention.num_samples=2")
    args = [f"ckpt_path={folder}", f"src_file={files[0]}", f"ref_file={files[1]}", f"output_dir={tmp_path}", report]
    metrics = evaluate(compose_inference("evaluate", *args))
    hypotheses = (tmp_path / "hypotheses.txt").read_text().splitlines()
    assert metrics["n"] == len(hypotheses) == len(files[0].read_text().splitlines())
    assert metrics["signatures"]["bleu"].startswith("nrefs:1") and (tmp_path / "report.html").is_file()


def test_every_explorer_request_is_answered(small):
    model = qkvmt.load(small, device="cpu")
    explorer = Explorer(model, None)
    source = SOURCES[0]
    shown = explorer.sentence({"source": source, "reference": TARGETS[0]})
    assert shown["translation"] == model.translate([source])[0] and shown["alignment"]["pharaoh"] is not None
    head = explorer.inspect({"source": source, "kind": "cross", "layer": 1, "head": 3, "row": 0})
    np.testing.assert_allclose(np.sum(head["weights"], axis=-1), 1, atol=1e-3)  # as sent: 4 decimals
    assert explorer.curves({"source": source, "row": 0})["readings"]
    assert len(explorer.lens({"source": source})["encoder_depths"]) == model.transformer.cfg.encoder_layers
    swap = {"source": source, "edit": "swap", "kind": "cross", "a": 1, "b": 3}
    assert (
        explorer.intervene(swap | {"what": "keys"})["edited"] == explorer.intervene(swap | {"what": "values"})["edited"]
    )


def test_the_swap_identities_hold(model):
    both, keys, values = (model.intervene(SOURCES[0], qkvmt.Swap(1, 3, w)) for w in ("both", "keys", "values"))
    assert both.edited == both.original and np.abs(both.log_prob_change).max() < 1e-3
    assert keys.edited == values.edited
    np.testing.assert_allclose(keys.log_prob_edited, values.log_prob_edited, atol=1e-3)


def test_inspect_and_lens_read_the_imported_model(model):
    inspection = model.inspect(SOURCES[1], kind="encoder", layer=0, head=2)
    assert inspection.d_k == 64
    lens = model.lens(SOURCES[1])
    assert lens.depths[-1] == model.translate([SOURCES[1]])[0]  # all six layers: the model's own translation


def test_heads_masks_every_head_of_every_kind(small, files, tmp_path):
    args = [f"ckpt_path={small}", f"src_file={files[0]}", f"ref_file={files[1]}", f"output_dir={tmp_path}"]
    metrics = heads(compose_inference("heads", *args, "prune_points=2", "profile_sentences=2"))
    assert (tmp_path / "heads.json").is_file() and metrics["n"] == len(files[0].read_text().splitlines())


def test_faithfulness_scores_the_signals(small, files, tmp_path):
    args = [f"ckpt_path={small}", f"src_file={files[0]}", f"ref_file={files[1]}", f"output_dir={tmp_path}"]
    metrics = faithfulness(compose_inference("faithfulness", *args, "n=2"))
    assert metrics["n"] == 2 and (tmp_path / "faithfulness.json").is_file()


def test_align_scores_gold_links_with_both_imported_models_symmetrized(folders, tmp_path):
    gold = tmp_path / "gold"
    gold.mkdir()
    (gold / "de").write_text("\n".join(SOURCES) + "\n")
    (gold / "en").write_text("\n".join(TARGETS) + "\n")
    (gold / "alignment.talp").write_text("1-1 2-2 3-3 4-4 5-5 6-6 7-7\n1-1 2-2 3-3 4-4 5-5 6-6\n")
    args = [f"ckpt_path={folders[0]}", f"reverse_ckpt_path={folders[1]}", f"gold_dir={gold}"]
    metrics = align(compose_inference("align", *args, f"output_dir={tmp_path / 'out'}"))
    aer = json.loads((tmp_path / "out" / "aer.json").read_text())
    assert set(aer["symmetrized"]) >= {"aer", "precision", "recall"} and 0 <= metrics["best"]["aer"] <= 1
