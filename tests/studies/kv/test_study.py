"""The study of keys and values on a model with several layers, non-zero biases and layer norms far
from 1: the batched per-row swap and patch translate each sentence as Model.intervene does with
qkvmt.Swap and qkvmt.Patch (the oracle); keys only and values only give one output and both
leaves every logit as it was; the word chooser and the outcomes on hand-made inputs; and the
study from a checkpoint and a corpus to its files, and its record entry and tables."""

import contextlib
import gzip
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from qkvmt.analysis.edits import Patch, Swap
from qkvmt.analysis.trace import edited
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.pipeline.intervene import intervene_command
from qkvmt.record import from_study, record_file, tables
from qkvmt.studies.kv.passes import Sentence, batches, run
from qkvmt.studies.kv.patch import Donor, patch_sites
from qkvmt.studies.kv.row_edits import patch_rows, swap_rows
from qkvmt.studies.kv.swap import PARTS, swap_sites
from qkvmt.studies.kv.words import Word, first_pair, normal, patch_outcome, swap_outcome, translated_words
from qkvmt.text.tokenizer import Specials, decode, encode, train_bpe
from tests.conftest import MULTI30K, compose_inference, requires_multi30k, write_corpus
from tests.record.conftest import RECORD

LETTERS = str.maketrans("0123456789", "abcdefghij")  # the toy corpus's words made alphabetic: w12 -> wbc


def letter_corpus(root: Path, sizes: dict) -> Path:
    """The toy corpus of tests/conftest.py with every digit a letter, so that its words are words."""
    write_corpus(root, sizes)
    for path in root.glob("*.gz"):
        path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()).decode().translate(LETTERS).encode()))
    return root


def lines_of(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


def noisy(vocab_size: int, specials: Specials, seed: int = 0) -> Transformer:
    """3+3 layers, biases and layer norms far from their initial 0 and 1 (as tests/analysis/test_trace.py's)."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=vocab_size, d_model=16, n_heads=4, encoder_layers=3, decoder_layers=3, ffn_dim=32,
        **specials.config_fields(),
    )  # fmt: skip
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.3)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
    return model


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A noisy model with a tokenizer of the letter corpus, as qkvmt.load gives models, and eight
    sentences, each with its own two positions to edit."""
    root = letter_corpus(tmp_path_factory.mktemp("kv") / "corpus", {"train": 200, "test_2016_flickr": 8})
    tok = train_bpe([x for lang in ("de", "en") for x in lines_of(root / f"train.{lang}.gz")], vocab_size=120)
    t = noisy(tok.get_vocab_size(), Specials.of(tok))
    meta = CheckpointMeta(t.cfg.to_dict(), tok.to_str(), "de", "en", decode={"beam_size": 3, "max_tokens": 40})
    model = Model(t, tok, meta, [root / "noisy.ckpt"], SimpleNamespace(autocast=contextlib.nullcontext))
    sources = lines_of(root / "test_2016_flickr.de.gz")
    ids, translations = encode(tok, sources), model.translate(sources).ids
    sentences = []
    for k, (source, x, own) in enumerate(zip(sources, ids, translations)):
        a, b = k % (len(x) - 1), len(x) - 1  # rows differ in where they are edited
        word = lambda p: Word(p, p, "", "", (min(k, len(own)),))  # noqa: E731  A's rows: one that exists
        sentences.append(Sentence(k, source, x, own, decode(tok, [own])[0], word(a), word(b)))
    return model, sentences, batches(model, sentences, max_tokens=40)


def test_the_batches_hold_several_rows_and_every_sentence_once(setup):
    model, sentences, all_batches = setup
    assert len(all_batches) > 1 and max(len(b.members) for b in all_batches) > 1
    assert sorted(k for b in all_batches for k in b.members) == list(range(len(sentences)))


@pytest.mark.parametrize("layers", [[0, 1, 2], [1]])
def test_the_batched_swap_translates_each_sentence_as_model_intervene_does(setup, layers):
    model, sentences, all_batches = setup
    cfg = model.decoding()
    for part in PARTS:
        passes = run(model, sentences, all_batches, swap_sites(sentences, part, layers), cfg)
        for s, p in zip(sentences, passes):
            oracle = model.intervene(s.source, Swap(s.a.position, s.b.position, part, layers=tuple(layers)))
            assert decode(model.tokenizer, [p.edited])[0] == oracle.edited
            np.testing.assert_allclose(p.log_prob, oracle.log_prob_edited, atol=1e-5)
            rows = list(s.a.rows)
            np.testing.assert_allclose(p.row_map, oracle.cross_after[:, :, rows].mean(axis=(1, 2)), atol=1e-5)


def donor_of(tok, s: Sentence) -> tuple[Sentence, Donor]:
    """The sentence with A at the first position from its own whose token another token can
    replace so that the donor's text splits into the donor's ids, and that donor."""
    n = len(s.src_ids)
    for p in ((s.a.position + i) % n for i in range(n)):
        for token in range(4, tok.get_vocab_size()):
            ids = [*s.src_ids[:p], token, *s.src_ids[p + 1 :]]
            text = decode(tok, [ids])[0]
            if token != s.src_ids[p] and encode(tok, [text])[0] == ids:
                return replace(s, a=replace(s.a, position=p)), Donor("", ids, text, "", "")
    raise AssertionError(f"no donor for {s.source!r}")


def test_the_batched_patch_translates_each_sentence_as_model_intervene_does(setup):
    model, sentences, _ = setup
    sentences, donors = zip(*(donor_of(model.tokenizer, s) for s in sentences))
    all_batches = batches(model, list(sentences), max_tokens=40)
    assert len({s.a.position for s in sentences}) > 1  # rows differ in where they are patched
    for part in PARTS:
        passes = run(model, sentences, all_batches, patch_sites(model, sentences, donors, part), model.decoding())
        for s, d, p in zip(sentences, donors, passes):
            oracle = model.intervene(s.source, Patch(d.text, part, positions=(s.a.position,)))
            assert decode(model.tokenizer, [p.edited])[0] == oracle.edited
            np.testing.assert_allclose(p.log_prob, oracle.log_prob_edited, atol=1e-5)


def test_keys_only_and_values_only_give_one_output_and_both_leave_every_logit(setup):
    model, sentences, all_batches = setup
    t = model.transformer
    passes = {part: run(model, sentences, all_batches, swap_sites(sentences, part, [0, 1, 2]), model.decoding())
              for part in PARTS}  # fmt: skip
    assert [p.edited for p in passes["keys"]] == [p.edited for p in passes["values"]]
    assert [p.edited for p in passes["both"]] == [s.original for s in sentences]
    with torch.no_grad():
        for batch in all_batches:
            plain = t(batch.src, batch.tgt_in)[0]  # (B, T, V)
            logits = {}
            for part in PARTS:
                with edited(t, swap_sites(sentences, part, [0, 1, 2])(batch)):
                    logits[part] = t(batch.src, batch.tgt_in)[0]
            torch.testing.assert_close(logits["keys"], logits["values"], atol=1e-5, rtol=1e-5)
            assert (logits["both"] - plain).abs().max() <= 1e-5
            assert (logits["keys"] - plain).abs().max() > 1e-2  # the swap alone does change the output


def test_a_row_edit_moves_each_rows_own_positions():
    t = torch.randn(3, 2, 5, 4)  # (B, H, S, d_k)
    a, b = torch.tensor([0, 3, 2]), torch.tensor([4, 1, 2])
    out = swap_rows(a, b)(t)
    for i in range(3):
        order = list(range(5))
        order[a[i]], order[b[i]] = int(b[i]), int(a[i])
        assert torch.equal(out[i], t[i][:, order])
    donor = torch.randn(3, 2, 6, 4)
    out = patch_rows(a, donor)(t)
    for i in range(3):
        expected = t[i].clone()
        expected[:, a[i]] = donor[i, :, a[i]]
        assert torch.equal(out[i], expected)
    with pytest.raises(ValueError, match="3 rows was given a site of 15 rows"):
        swap_rows(a, b)(torch.randn(15, 2, 5, 4))  # beams' rows are not sentences' rows


def alignment(src_words, tgt_words, links, src_pieces=None):
    """A hand-made WordAlignment: words, their subword positions and links (source, target)."""
    pieces = src_pieces or [1] * len(src_words)
    starts = np.cumsum([0, *pieces])
    return SimpleNamespace(
        src_words=src_words,
        tgt_words=tgt_words,
        src_groups=[list(range(starts[i], starts[i + 1])) for i in range(len(src_words))],
        tgt_groups=[[j] for j in range(len(tgt_words))],
        links=links,
    )


def test_the_chooser_takes_the_first_two_translated_content_words():
    a = alignment(
        ["Ein", "Hund", "rennt", "über", "eine", "grüne", "Wiese", "."],
        ["A", "dog", "runs", "across", "a", "green", "meadow."],
        [(1, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)],
        src_pieces=[1, 1, 2, 1, 1, 1, 1, 1],  # rennt: two subwords
    )
    words = translated_words(a, "de", "en")
    # Ein and über: function words; Hund's links: "A" (passed over) and "dog"; rennt: two subwords
    assert [(w.text, w.target, w.position, w.rows) for w in words] == [
        ("Hund", "dog", 1, (1,)),
        ("grüne", "green", 6, (5,)),
        ("Wiese", "meadow", 7, (6,)),  # the punctuation a target word carries is not the word
    ]
    a, b = first_pair(words)
    assert (a.text, b.text) == ("Hund", "grüne")


def test_a_word_whose_translation_recurs_or_is_linked_twice_is_passed_over():
    a = alignment(
        ["Hund", "Katze", "Wiese", "Baum"],
        ["dog", "and", "dog", "cat", "tree", "meadow"],
        [(0, 0), (0, 2), (1, 3), (2, 4), (2, 5), (3, 1)],
    )
    # Hund: "dog" twice in the translation; Wiese: two content words; Baum: only a function word
    assert [w.text for w in translated_words(a, "de", "en")] == ["Katze"]
    assert first_pair(translated_words(a, "de", "en")) is None


def test_the_outcomes_of_a_swap_and_of_a_patch():
    original = "A dog runs across a green meadow."
    assert swap_outcome("dog", "meadow", original, "A meadow runs across a green dog.") == "traded"
    assert swap_outcome("dog", "meadow", original, "A dog walks over a meadow.") == "kept"
    assert swap_outcome("dog", "meadow", original, "A green dog runs across a green dog.") == "changed"
    assert swap_outcome("meadow", "dog", original, "A Meadow runs across a green dog!") == "traded"  # case, order
    assert patch_outcome("dog", "cat", "A cat runs.") == "donor"
    assert patch_outcome("dog", "cat", "A dog runs.") == "original"
    assert patch_outcome("dog", "cat", "A dog and a cat run.") == "other"
    assert patch_outcome("dog", "cat", "A horse runs.") == "other"
    assert normal("(Meadow).") == "meadow" and normal("dog's") == "dog's"


SENTENCES = [  # a small corpus the bundled German-English model translates well
    "Ein Hund rennt über eine grüne Wiese .",
    "Eine Frau liest ein Buch im Park .",
    "Zwei Kinder spielen im Schnee .",
    "Ein Mann fährt Fahrrad auf der Straße .",
]


def run_study(*overrides):
    return intervene_command(compose_inference("intervene", "study=both", *overrides))


def test_the_study_runs_on_a_corpus_to_its_files_and_its_record(tmp_path, capsys):
    corpus, out = tmp_path / "sentences.de", tmp_path / "out"
    corpus.write_text("".join(line + "\n" for line in SENTENCES))
    result = run_study("ckpt_path=multi30k-de-en", f"src_file={corpus}", "n=3", f"output_dir={out}")
    assert {p.name for p in out.iterdir()} == {"study.json", "study.md", "sentences.jsonl"}
    data = json.loads((out / "study.json").read_text())
    assert data == {k: v for k, v in result.items() if k != "output_dir"}
    assert data["n"] == 3 and data["split"] == "sentences.de" and data["decoding"]["beam_size"] == 5
    swap = data["swap"]
    assert [(c["swapped"], c["layers"]) for c in swap["conditions"]] == [
        (part, scope) for scope in ("every layer", "layer 0", "layer 1", "layer 2") for part in PARTS
    ]
    for i in swap["identities"].values():
        assert i["keys_values_same_translation"] == 1 and i["both_same_translation_as_original"] == 1
        assert i["keys_values_largest_log_prob_difference"] < 1e-4 and i["both_largest_log_prob_change"] < 1e-4
    for c in swap["conditions"]:
        assert c["n"] == 3 and sum(c["outcomes"].values()) == pytest.approx(1) and "nrefs:1" in c["signature"]
        assert len(c["shares"]) == 3
    by_part = {c["patched"]: c for c in data["patch"]["conditions"]}
    assert by_part["values"]["n"] + data["patch"]["without_donor"] == 3
    sentences = [json.loads(line) for line in (out / "sentences.jsonl").read_text().splitlines()]
    assert [s["source"] for s in sentences] == SENTENCES[:3] and all(len(s["swap"]["edits"]) == 12 for s in sentences)
    first = sentences[0]  # Hund and rennt (dog, runs), then Hund from a donor
    assert (first["swap"]["A"], first["swap"]["B"], first["patch"]["A"]) == ("Hund", "rennt", "Hund")
    summary = (out / "study.md").read_text()
    assert summary in capsys.readouterr().out and "| keys | every layer |" in summary

    entry, classes = from_study.entry(out, conditions="a test", taken_ids=())
    with_method = {**RECORD, "methods": {**RECORD["methods"], "command": "the whole command's wall time"}}
    record = record_file.add(with_method, entry, classes)  # the record takes it as it is
    assert entry["kv_study_of"] == "multi30k-de-en" and entry["id"] == "kv-study-multi30k-de-en-1"
    assert entry["command"].endswith("qkvmt intervene study=both ckpt_path=multi30k-de-en split=sentences.de n=3")
    text = tables.TABLES["kv-study"](record)
    assert "record kv-study-multi30k-de-en-1" in text and "| keys | every layer |" in text
    assert "kv-study" not in tables.figures(record, "measurement")  # its figures are its own table's


def test_bad_settings_are_one_line_errors_before_any_work():
    for setting, message in (("study=all", "study='all': use one of swap, patch, both"), ("n=0", "n=0")):
        with pytest.raises(UserError, match=message):
            run_study("ckpt_path=multi30k-de-en", setting)


@requires_multi30k
def test_on_the_bundled_model_keys_and_values_trade_places_in_the_map_and_not_in_the_output(tmp_path):
    result = intervene_command(
        compose_inference("intervene", "study=both", "ckpt_path=multi30k-de-en", "n=4", f"output_dir={tmp_path / 'o'}")
    )
    assert result["n"] == 4 and Path(MULTI30K).is_dir()
    by_edit = {(c["swapped"], c["layers"]): c for c in result["swap"]["conditions"]}
    keys, values = by_edit["keys", "layer 1"], by_edit["values", "layer 1"]
    assert keys["outcomes"] == values["outcomes"] and keys["chrf"] == pytest.approx(values["chrf"])
    assert keys["shares"][1]["A"]["after"] == pytest.approx(keys["shares"][1]["B"]["before"], abs=1e-4)
    assert values["shares"][1]["A"]["after"] == pytest.approx(values["shares"][1]["A"]["before"], abs=1e-4)
