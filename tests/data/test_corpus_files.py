"""Splits given by path (two files or one TSV), streamed into the id cache, the tokenizer's sample,
and the refusals of bad files, against the Multi30k layout and the lists the cache was built from."""

import gzip
import hashlib
import shutil
import tracemalloc

import numpy as np
import pytest
from hydra.utils import instantiate

from qkvmt.data import pairs as pairs_module
from qkvmt.data.batching import TokenizedCorpus
from qkvmt.data.pairs import Joined, PairFiles, PairLists, hash_pairs, sample_pairs
from qkvmt.errors import UserError
from qkvmt.files import hash_lines
from qkvmt.text.sources import read_parallel
from qkvmt.text.tokenizer import encode, train_bpe
from tests.conftest import compose_train, tiny_overrides, write_corpus

SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}


def datamodule(corpus, out, *overrides, **settings):
    return instantiate(compose_train(*tiny_overrides(corpus, out), *overrides).data, **settings)


def write_tsv(path, src, tgt):
    path.write_text("".join(f"{s}\t{t}\n" for s, t in zip(src, tgt)), encoding="utf-8")
    return path


def batches(dm) -> list:
    return [{k: v.tolist() for k, v in b.items() if k != "ntokens"} for b in dm.train_dataloader()]


def cached(out) -> dict:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted((out / "cache").rglob("*")) if p.is_file()}


def test_splits_by_path_as_tsv_or_two_files_give_the_multi30k_layouts_tokenizer_caches_and_batches(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", gz=False)
    reference = datamodule(corpus, tmp_path / "ref")
    tsv = {stage: write_tsv(tmp_path / f"{stage}.tsv", *reference.read(stage)) for stage in SPLITS}
    two = {stage: f"[{corpus}/{split}.de,{corpus}/{split}.en]" for stage, split in SPLITS.items()}
    layouts = {
        "tsv": [f"data.{stage}={path}" for stage, path in tsv.items()],
        "mixed": [f"data.train={two['train']}", f"data.val={tsv['val']}", f"data.test={two['test']}"],
    }
    runs = {"ref": reference} | {
        name: datamodule(tmp_path / "elsewhere", tmp_path / name, *given) for name, given in layouts.items()
    }
    for name, dm in runs.items():
        dm.load_tokenizer(tmp_path / name / "tokenizer.json")
        dm.prepare_data()
    ref_batches = batches(reference)
    for name in layouts:
        assert runs[name].tokenizer.to_str() == reference.tokenizer.to_str()
        assert cached(tmp_path / name) == cached(tmp_path / "ref")  # same folders, same bytes
        assert batches(runs[name]) == ref_batches
        assert runs[name].read("test") == reference.read("test")


def test_the_streamed_cache_is_the_list_built_one_with_empty_pairs_skipped(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", sizes={"train": 200}, gz=False)
    src, tgt = read_parallel(corpus / "train.de", corpus / "train.en")
    src[3], tgt[7], src[9], tgt[9] = "", "", "", ""
    (corpus / "train.de").write_text("".join(s + "\n" for s in src))
    (corpus / "train.en").write_text("".join(t + "\n" for t in tgt))
    kept = [(s, t) for s, t in zip(src, tgt) if s and t]
    tok = train_bpe([s for s, _ in kept] + [t for _, t in kept], vocab_size=80)
    streamed = Joined([PairFiles(corpus / "train.de", corpus / "train.en")])
    counted = hashlib.sha256(b"de-en\0")
    hash_pairs(counted, streamed, chunk=16)
    assert streamed.counts == [(len(kept), 200)]
    listed = hashlib.sha256(b"de-en\0")  # the training text's digest as it was made from the two lists
    for side in zip(*kept):
        hash_lines(listed, list(side))
    assert counted.hexdigest() == listed.hexdigest()  # so a tokenizer's record of it still matches
    corpus_ = TokenizedCorpus.build(tok, streamed, tmp_path / "cache", chunk=16)
    # the key as it was made from the two lists, so earlier caches are found
    h = hashlib.sha256(TokenizedCorpus.FORMAT.encode() + tok.to_str().encode())
    for side in zip(*kept):
        hash_lines(h, list(side))
    (folder,) = (tmp_path / "cache").iterdir()
    assert folder.name == h.hexdigest()[:20]
    for name, side in (("src", 0), ("tgt", 1)):
        ids = encode(tok, [pair[side] for pair in kept])
        assert (folder / f"{name}.ids").read_bytes() == np.array([i for x in ids for i in x], np.int32).tobytes()
        offsets = np.concatenate([[0], np.cumsum([len(x) for x in ids])])
        assert np.load(folder / f"{name}_off.npy").tolist() == offsets.tolist()
    assert len(corpus_) == len(kept)


def test_a_resumed_run_reads_the_training_files_once_through_and_finds_its_cache_by_the_texts_digest(
    tmp_path, monkeypatch
):
    corpus = write_corpus(tmp_path / "corpus", gz=False)
    train = f"data.train=[{corpus}/train.de,{corpus}/train.en]"
    out = tmp_path / "run"
    first = datamodule(corpus, out, train)
    first.load_tokenizer(out / "tokenizer.json")
    first.prepare_data()
    expected = batches(first)
    reads = []
    opened = pairs_module.parallel_lines
    monkeypatch.setattr(pairs_module, "parallel_lines", lambda *paths: reads.append(paths[0].name) or opened(*paths))

    def resumed():
        reads.clear()
        dm = datamodule(corpus, out, train)
        dm.load_tokenizer(out / "tokenizer.json")
        dm.prepare_data()
        return dm

    again = resumed()
    assert reads.count("train.de") == 2  # the sources, then the targets: counted and hashed at once
    assert batches(again) == expected
    (alias,) = (out / "cache" / "by-text").iterdir()
    assert (out / "cache" / alias.read_text() / "tgt_off.npy").exists()
    folders = {p.name for p in (out / "cache").iterdir()}
    # A cache from before the digest's shortcut (no by-text/) is found by the pairs' own key, not rebuilt.
    shutil.rmtree(out / "cache" / "by-text")
    older = resumed()
    assert reads.count("train.de") == 4  # and a fifth pass would be encoding
    assert {p.name for p in (out / "cache").iterdir()} == folders and batches(older) == expected
    # A shortcut naming a folder that is gone builds it again, the same.
    shutil.rmtree(out / "cache" / alias.read_text())
    rebuilt = resumed()
    assert reads.count("train.de") == 5 and {p.name for p in (out / "cache").iterdir()} == folders
    assert batches(rebuilt) == expected


def test_building_the_cache_from_files_holds_a_chunk_not_the_corpus(tmp_path):
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnop"), 40)) for _ in range(300)]
    lines = [" ".join(rng.choice(words, 8)) for _ in range(1000)]
    n, src, tgt = 20_000, tmp_path / "big.de.gz", tmp_path / "big.en"
    src.write_bytes(gzip.compress("".join(lines[i % 1000] + "\n" for i in range(n)).encode(), compresslevel=1))
    tgt.write_text("".join(lines[(i * 7) % 1000].upper() + "\n" for i in range(n)))
    text = 2 * n * len(lines[0])  # 13 MB
    tok = train_bpe(lines + [x.upper() for x in lines], vocab_size=400)
    tracemalloc.start()
    corpus = TokenizedCorpus.build(tok, PairFiles(src, tgt), tmp_path / "cache", chunk=50)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < text / 10, (peak, text)  # the offsets (16 bytes a pair) and one chunk's text and ids
    _, s, t = corpus[12_345]
    assert [s.tolist(), t.tolist()] == encode(tok, [lines[12_345 % 1000], lines[(12_345 * 7) % 1000].upper()])


def test_below_the_sample_bound_the_tokenizer_is_todays_and_above_it_a_seeded_sample_of_the_bound(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    dm = datamodule(corpus, tmp_path / "whole")
    src, tgt = dm.training_pairs()
    whole = dm.load_tokenizer(tmp_path / "whole" / "tokenizer.json")
    assert whole.to_str() == train_bpe(tgt + src, vocab_size=120).to_str()  # en < de: the target side first
    pairs = PairLists(src, tgt)
    drawn = sample_pairs(pairs, 50, seed=1)
    assert drawn == sample_pairs(pairs, 50, seed=1) != sample_pairs(pairs, 50, seed=2)
    assert len(drawn[0]) == 50 and drawn[2] == 300
    positions = [src.index(s) for s in drawn[0]]
    assert positions == sorted(positions) and all(tgt[i] == t for i, t in zip(positions, drawn[1]))
    assert sample_pairs(pairs, 300, seed=1) == (src, tgt, 300)
    sampled = datamodule(corpus, tmp_path / "sampled", "data.tokenizer_sample=50", "seed=1")
    tok = sampled.load_tokenizer(tmp_path / "sampled" / "tokenizer.json")
    assert tok.to_str() == train_bpe(drawn[1] + drawn[0], vocab_size=120).to_str()


def refused(tmp_path, corpus, *overrides, **settings) -> str:
    """The one-line error of a datamodule with these overrides, and that nothing was written."""
    out = tmp_path / "out"
    with pytest.raises(Exception) as e:
        dm = datamodule(corpus, out, *overrides, **settings)
        dm.load_tokenizer(out / "tokenizer.json")
    assert not out.exists()
    cause = e.value
    while not isinstance(cause, UserError):  # Hydra's instantiate wraps what the constructor raised
        cause = cause.__cause__
    assert "\n" not in str(cause)
    return str(cause)


def test_a_byte_order_mark_and_invisible_characters_leave_the_training_text_as_without_them(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", gz=False)
    src, tgt = read_parallel(corpus / "train.de", corpus / "train.en")
    src[5] = ""  # a pair with an empty side, skipped; a line of invisible characters stands in for it below
    hidden = [s.replace(" ", " \u200b", 1).replace("w", "w\u2060", 1) for s in src]  # inside words too
    hidden[5] = "\x00\ufeff\u200b"

    def written(name: str, sources: list[str], mark: str = "") -> tuple:  # a TSV and two line-parallel files
        tsv = tmp_path / f"{name}.tsv"
        tsv.write_text(mark + "".join(f"{s}\t{t}\n" for s, t in zip(sources, tgt)), encoding="utf-8")
        for lang, lines in (("de", sources), ("en", tgt)):
            (tmp_path / f"{name}.{lang}").write_text(mark + "".join(x + "\n" for x in lines), encoding="utf-8")
        return tsv, f"data.extra_train=[{{src:{tmp_path / name}.de,tgt:{tmp_path / name}.en}}]"

    def read(tsv, extra):
        dm = datamodule(tmp_path / "elsewhere", tmp_path / "out", f"data.train={tsv}", f"data.val={tsv}", extra)
        return dm.training_pairs(), dm.texts.digest(), dm.read("val")

    assert read(*written("hostile", hidden, mark="\ufeff")) == read(*written("clean", src))


@pytest.mark.parametrize("line", ["no tab here", "one\ttab\ttoo many"])
def test_a_tsv_line_without_exactly_one_tab_is_refused_naming_file_and_line(tmp_path, line):
    corpus = write_corpus(tmp_path / "corpus")
    val = tmp_path / "val.tsv"
    val.write_text("ein hund\ta dog\n\tempty source\n" + line + "\nzwei\ttwo\n")
    message = refused(tmp_path, corpus, f"data.val={val}")
    assert message.startswith(f"{val}, line 3: ") and "source<TAB>target" in message


def test_files_of_different_lengths_a_missing_file_and_bad_utf8_are_refused(tmp_path):
    corpus = write_corpus(tmp_path / "corpus", gz=False)
    short = tmp_path / "short.en"
    short.write_text("a\nb\n")
    message = refused(tmp_path, corpus, f"data.test=[{corpus}/train.de,{short}]")
    assert f"{corpus}/train.de has 300 lines, {short} has 2" in message
    assert "file not found: " + str(tmp_path / "nowhere.tsv") in refused(
        tmp_path, corpus, f"data.val={tmp_path}/nowhere.tsv"
    )
    bad = tmp_path / "bad.de"
    bad.write_bytes((corpus / "train.de").read_bytes().replace(b"\n", b"\n\xff", 1))  # line 2
    assert refused(tmp_path, corpus, f"data.train=[{bad},{corpus}/train.en]").startswith(
        f"{bad}, line 2: not valid UTF-8"
    )
    assert "data.train=" in refused(tmp_path, corpus, "data.train=[a,b,c]")
    empty = [tmp_path / "empty.de", tmp_path / "empty.en"]
    for path in empty:
        path.write_text("\n\n")
    assert refused(tmp_path, corpus, f"data.train=[{empty[0]},{empty[1]}]").endswith(
        "has no pair with text on both sides; check those files"  # given by path: data.root plays no part
    )


def test_alignment_links_on_a_corpus_over_the_sample_bound_are_refused_before_anything_is_written(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    message = refused(tmp_path, corpus, "data.tokenizer_sample=100", alignment_links="grow-diag-final-and")
    assert "module.alignment" in message and "300 pairs" in message and "data.tokenizer_sample=100" in message
