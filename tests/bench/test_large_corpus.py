"""The benchmark's corpus stage: its synthetic corpus has the lengths and word frequencies it is made
to have, and `qkvmt benchmark stages=[corpus]` writes every step's time and peak memory."""

import json
from types import SimpleNamespace

import numpy as np

from qkvmt.bench.large_corpus import HELD_OUT, write_synthetic
from qkvmt.text.sources import read_parallel, tsv_lines
from tests.commandline import run_python


def test_the_synthetic_corpus_has_its_lengths_and_zipfian_words(tmp_path):
    c = SimpleNamespace(mean_words=25, max_words=250, vocab=5000)
    write_synthetic(tmp_path, 20_000, c, seed=0)
    src, tgt = read_parallel(tmp_path / "train.en", tmp_path / "train.de")
    assert len(src) == 20_000 and list(tsv_lines(tmp_path / "val.tsv")) == list(
        zip(*read_parallel(tmp_path / "val.en", tmp_path / "val.de"))
    )
    assert len(read_parallel(tmp_path / "test.en", tmp_path / "test.de")[0]) == HELD_OUT
    words = [line.split()[:-1] for line in src]  # each line ends with " ."
    lengths = np.array([len(w) for w in words])
    assert abs(lengths.mean() - 25) < 1 and np.median(lengths) < lengths.mean() and lengths.max() > 75  # long tail
    counts = np.sort(np.unique(np.concatenate([np.array(w) for w in words]), return_counts=True)[1])[::-1]
    harmonic = (1 / np.arange(1, c.vocab + 1)).sum()
    for rank in (1, 2, 10):  # Zipf: a word's share is 1 / (rank H)
        assert abs(counts[rank - 1] / counts.sum() * rank * harmonic - 1) < 0.1
    assert tgt != src and abs(np.mean([len(t.split()) for t in tgt]) - lengths.mean() - 1) < 1


def test_the_corpus_stage_writes_each_steps_time_and_peak_memory(tmp_path):
    out = tmp_path / "bench"
    proc = run_python(  # in this Python: the stage's own fresh processes are what measure
        "-m",
        "qkvmt",
        "benchmark",
        "stages=[corpus]",
        "device=cpu",
        f"output_dir={out}",
        "corpus.pairs=500",
        "corpus.vocab=300",
        "corpus.vocab_size=200",
        "corpus.tokenizer_sample=100",
        "corpus.max_tokens=256",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((out / "benchmark.json").read_text())["corpus"]
    assert r["pairs"] == 500 and r["generate"]["text_mb"] > 0
    for step in ("tokenizer", "encode", "resume"):
        assert r[step]["seconds"] > 0 and r[step]["peak_mb"] > 0
    assert r["encode"]["pairs_per_s"] == r["pairs"] / r["encode"]["seconds"] and r["encode"]["cache_mb"] > 0
    assert r["encode"]["tokens"] * 4 <= r["encode"]["cache_mb"] * 2**20  # int32 ids on disk
    assert r["resume"]["first_batch_s"] > 0 and 0 < r["resume"]["first_batch_pairs"] <= 500
    assert "corpus of 500 pairs" in proc.stdout
