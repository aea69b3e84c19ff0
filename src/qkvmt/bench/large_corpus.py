"""The benchmark's corpus stage: a synthetic corpus at WMT14 en-de's sentence lengths, read by path
as a training run reads it, each step in a fresh process so that its peak resident set is its own.

The corpus is written to plain files in a temporary folder: sentence lengths drawn from a lognormal
distribution (median 21 words, mean 25, a long tail up to `max_words`, as WMT14 en-de's news
sentences have), words drawn from a Zipfian vocabulary of syllable words, so the tokenizer has
subwords to learn. The steps: the tokenizer trained (on data.tokenizer_sample pairs at most),
every split encoded and cached, and a resumed run (a second DataModule finding the tokenizer and
the caches) with its first training batch. Peak memory is the process's own high-water mark
(VmHWM): the interpreter and its imports included, as a training process has them.
"""

import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from qkvmt.host.process_memory import RSS_READABLE, peak_resident_bytes

CONSONANTS, VOWELS, CODAS = "bdfgklmnprstvz", "aeiou", ("", "n", "r", "s", "t")
LANGS = ("en", "de")
HELD_OUT = 3000  # pairs of the validation and of the test split, WMT's newstest size


def syllable_words(vocab: int) -> np.ndarray:
    """`vocab` distinct words of one to a few syllables, the shortest the most frequent (rank order)."""
    syllables = [c + v + k for c in CONSONANTS for v in VOWELS for k in CODAS] + list(VOWELS)
    words, n = [], 1
    while len(words) < vocab:
        digits, k = [], n
        while k:
            k, d = divmod(k, len(syllables))
            digits.append(syllables[d])
        words.append("".join(digits))
        n += 1
    return np.array(words, dtype=object)


def sentence_lengths(rng, n: int, mean_words: float, max_words: int) -> np.ndarray:
    """Words per sentence: lognormal with sigma 0.6 (median = mean / 1.2), cut to 1..max_words."""
    sigma = 0.6
    mu = np.log(mean_words) - sigma**2 / 2
    return np.clip(np.rint(rng.lognormal(mu, sigma, n)), 1, max_words).astype(np.int64)


def write_synthetic(folder: Path, pairs: int, c, seed: int) -> None:
    """train.{en,de}, and HELD_OUT pairs each of val.tsv and test.{en,de}: one language's sentences and
    the other's, lengths correlated, words Zipfian (s = 1) over each side's own vocabulary."""
    rng = np.random.default_rng(seed)
    words = syllable_words(c.vocab)
    vocab = [words, np.array([w[::-1] + "n" for w in words], dtype=object)]  # the other language's words
    zipf = 1.0 / np.arange(1, c.vocab + 1)
    cdf = np.cumsum(zipf / zipf.sum())
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, n in (("train", pairs), ("val", HELD_OUT), ("test", HELD_OUT)):
        paths = [folder / f"{split}.{lang}" for lang in LANGS]
        with open(paths[0], "w", encoding="utf-8") as src, open(paths[1], "w", encoding="utf-8") as tgt:
            for start in range(0, n, 100_000):
                size = min(100_000, n - start)
                lengths = sentence_lengths(rng, size, c.mean_words, c.max_words)
                other = np.clip(np.rint(lengths * rng.lognormal(0, 0.15, size)), 1, c.max_words).astype(np.int64)
                for file, words, lens in zip((src, tgt), vocab, (lengths, other)):
                    ids = np.minimum(np.searchsorted(cdf, rng.random(int(lens.sum()))), c.vocab - 1)
                    tokens = words[ids].tolist()
                    ends = np.cumsum(lens).tolist()
                    file.write("".join(" ".join(tokens[e - k : e]) + " .\n" for e, k in zip(ends, lens.tolist())))
        files[split] = paths
    # the validation split as one TSV file: both layouts a practitioner gives
    with open(folder / "val.tsv", "w", encoding="utf-8") as tsv:
        for s, t in zip(*(p.read_text(encoding="utf-8").splitlines() for p in files["val"])):
            tsv.write(f"{s}\t{t}\n")


def corpus_stage(c, seed: int) -> dict:
    """Time and peak memory of each step, on a synthetic corpus of `c.pairs` pairs (settings: the
    benchmark's corpus.*), written here (a chunk at a time) and read by each step in a fresh process;
    the files are deleted afterwards."""
    if not RSS_READABLE:
        return {"pairs": c.pairs, "error": "no /proc/self/status: peak memory is measured on Linux only"}
    settings = {k: c[k] for k in ("pairs", "mean_words", "max_words", "vocab", "vocab_size", "tokenizer_sample")}
    settings |= {"max_tokens": c.max_tokens, "seed": seed}
    result = {"pairs": c.pairs}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        write_synthetic(Path(folder) / "corpus", c.pairs, c, seed)
        text = sum(f.stat().st_size for f in (Path(folder) / "corpus").iterdir())
        result["generate"] = {"seconds": time.perf_counter() - start, "text_mb": text / 2**20}
        # Each step a fresh process forked from a server that has imported the DataModule and nothing
        # more: the imports (seconds each) happen once, and no step's memory is another's.
        server = multiprocessing.get_context("forkserver")
        server.set_forkserver_preload(["qkvmt.data.datamodule"])
        for step in ("tokenizer", "encode", "resume"):
            with ProcessPoolExecutor(max_workers=1, mp_context=server) as pool:
                result[step] = pool.submit(_step, step, Path(folder), settings).result()
    result["encode"]["pairs_per_s"] = c.pairs / result["encode"]["seconds"]
    return result


def _step(step: str, folder: Path, settings: dict) -> dict:
    from omegaconf import OmegaConf

    from qkvmt.data.datamodule import TranslationDataModule  # imported before the clock starts

    c = OmegaConf.create(settings)
    start = time.perf_counter()
    dm = _datamodule(TranslationDataModule, folder, c)
    row = {}
    if step == "encode":
        dm.load_tokenizer(folder / "run" / "tokenizer.json")
        row["load_tokenizer_s"], start = time.perf_counter() - start, time.perf_counter()
        corpus = dm.corpus("train")
        row["seconds"] = time.perf_counter() - start
        row["tokens"] = int(corpus.src_off[-1] + corpus.tgt_off[-1])
        dm.prepare_data()  # and the held-out splits' caches, which a resumed run finds too
        row["cache_mb"] = sum(f.stat().st_size for f in (folder / "cache").rglob("*") if f.is_file()) / 2**20
    elif step == "resume":  # a second run on the same files and caches: found, not built
        dm.load_tokenizer(folder / "run" / "tokenizer.json")
        dm.prepare_data()
        row["seconds"], start = time.perf_counter() - start, time.perf_counter()
        batch = next(iter(dm.train_dataloader()))
        row["first_batch_s"], row["first_batch_pairs"] = time.perf_counter() - start, len(batch["index"])
    else:  # the tokenizer, trained
        dm.load_tokenizer(folder / "run" / "tokenizer.json")
        row["seconds"] = time.perf_counter() - start
    return row | {"peak_mb": _peak_mb()}


def _datamodule(module, folder: Path, c):
    from qkvmt.text.sources import TextFiles

    files = folder / "corpus"
    return module(
        TextFiles,
        str(files),
        *LANGS,
        splits={},
        cache_dir=str(folder / "cache"),
        vocab_size=c.vocab_size,
        max_tokens=c.max_tokens,
        max_positions=1024,
        seed=c.seed,
        train=[str(files / f"train.{lang}") for lang in LANGS],
        val=str(files / "val.tsv"),
        test=[str(files / f"test.{lang}") for lang in LANGS],
        tokenizer_sample=c.tokenizer_sample,
    )


def _peak_mb() -> float:
    return peak_resident_bytes() / 2**20
