"""Shared fixtures: a small synthetic parallel corpus, Hydra composition, real-data locations, tiny
trained models, and a headless browser for the pages; and the slow marker, set from the fixtures
a test uses."""

import gzip
import os
import random
import shutil
import socket
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
MULTI30K = os.environ.get("QKVMT_MULTI30K")

requires_multi30k = pytest.mark.skipif(
    not MULTI30K, reason="real Multi30k not configured: set QKVMT_MULTI30K to its folder (.ci/run does)"
)


TRAINING_FIXTURES: set[str] = set()


def training_fixture(**kwargs):
    """pytest.fixture for a fixture that trains a model: every test that uses it, directly or
    through other fixtures, is marked slow, so `-m "not slow"` leaves it out."""

    def register(func):
        TRAINING_FIXTURES.add(kwargs.get("name", func.__name__))
        return pytest.fixture(**kwargs)(func)

    return register


def pytest_collection_modifyitems(config, items):
    # item.fixturenames is the closure: it includes what the test's fixtures request in turn.
    for item in items:
        if TRAINING_FIXTURES.intersection(item.fixturenames):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def train_only_when_slow(request, monkeypatch):
    """A test without the slow marker that trains in this process fails at once, saying so,
    instead of silently slowing the fast suite. Training in a subprocess (scripts/train.py) is
    not seen here: such a test carries @pytest.mark.slow by hand."""
    if request.node.get_closest_marker("slow"):
        return
    from lightning.pytorch import Trainer

    def refuse(*args, **kwargs):
        pytest.fail(
            f"{request.node.nodeid} trains a model: mark it @pytest.mark.slow, or, if it trains through "
            "a fixture, make that fixture a @training_fixture (tests/conftest.py)",
            pytrace=False,
        )

    monkeypatch.setattr(Trainer, "fit", refuse)


def write_corpus(root: Path, sizes=None, langs=("de", "en"), gz: bool = True, seed: int = 0) -> Path:
    """A learnable toy language pair in the Multi30k layout: the target is the source reversed,
    word by word through a fixed dictionary."""
    sizes = sizes or {"train": 300, "val": 24, "test_2016_flickr": 24}
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(40)]
    root.mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        src = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(n)]
        tgt = [" ".join("t" + w[1:] for w in reversed(line.split())) for line in src]
        for lang, lines in zip(langs, (src, tgt)):
            text = "".join(line + "\n" for line in lines).encode()
            if gz:
                (root / f"{split}.{lang}.gz").write_bytes(gzip.compress(text))
            else:
                (root / f"{split}.{lang}").write_bytes(text)
    return root


@pytest.fixture
def corpus(tmp_path) -> Path:
    return write_corpus(tmp_path / "corpus")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compose_train(*overrides: str):
    """The training config as scripts/train.py sees it (outputs go where the overrides say).

    experiment_name is set as Hydra's runtime would set it, which compose() does not start."""
    experiment = next((o.split("=", 1)[1] for o in overrides if o.startswith("experiment=")), "multi30k_de_en")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=[*overrides, f"experiment_name={experiment}"])


def tiny_overrides(data_root: Path, out: Path, steps: int = 8, val_every: int = 4) -> list[str]:
    return [
        "experiment=multi30k_de_en",  # scripts/train.py would choose the CPU recipe on a machine without a GPU
        "model=tiny",
        "trainer=cpu",
        f"data.root={data_root}",
        f"data.cache_dir={out / 'cache'}",
        "data.vocab_size=120",
        "data.max_tokens=512",
        f"paths.output_dir={out}",
        f"trainer.max_steps={steps}",
        f"trainer.val_check_interval={val_every}",
        "trainer.enable_progress_bar=false",
        "trainer.log_every_n_steps=1",
        "module.warmup_steps=4",
        "module.test_decode.beam_size=2",
    ]


@training_fixture(scope="session")
def trained_run(tmp_path_factory):
    """One tiny model trained for 40 steps on the toy corpus, validated at steps 20 and 40."""
    from qkvmt.pipeline.train import train

    base = tmp_path_factory.mktemp("trained")
    corpus = write_corpus(base / "corpus")
    run = base / "run"
    overrides = tiny_overrides(corpus, run, steps=40, val_every=20)
    train(compose_train(*overrides, "module.optimizer.lr=3e-3", "module.warmup_steps=10"))
    return {"corpus": corpus, "run": run}


@training_fixture(scope="session", params=["sentencepiece", "separate_bpe"])
def vocabulary_run(request, trained_run, tmp_path_factory):
    """trained_run's recipe with another vocabulary (data.tokenizer, beside trained_run's joint BPE): one
    SentencePiece unigram model over both languages, or a SentencePiece BPE model per language; 20 steps."""
    from qkvmt.pipeline.train import train

    run = tmp_path_factory.mktemp(request.param) / "run"
    overrides = tiny_overrides(trained_run["corpus"], run, steps=20, val_every=20)
    train(
        compose_train(
            *overrides, f"data/tokenizer={request.param}", "module.optimizer.lr=3e-3", "module.warmup_steps=10"
        )
    )
    return {"corpus": trained_run["corpus"], "run": run, "tokenizer": request.param}


@training_fixture(scope="session")
def supervised_run(tmp_path_factory):
    """A tiny model whose last decoder layer's head 1 learned eflomal's links of the toy corpus
    with full context, for 60 steps."""
    from qkvmt.pipeline.train import train

    base = tmp_path_factory.mktemp("supervised")
    corpus = write_corpus(base / "corpus")
    run = base / "run"
    overrides = tiny_overrides(corpus, run, steps=60, val_every=30)
    supervision = [
        "module.alignment.weight=1.0",
        "module.alignment.layer=-1",
        "module.alignment.head=1",
        "module.alignment.full_context=true",
    ]
    metrics = train(compose_train(*overrides, *supervision, "module.optimizer.lr=3e-3", "module.warmup_steps=10"))
    return {"corpus": corpus, "run": run, "metrics": metrics}


@training_fixture(scope="session")
def reverse_run(tmp_path_factory, trained_run):
    """trained_run's toy pair the other way round: en->de, same data and vocabulary size."""
    from qkvmt.pipeline.train import train

    run = tmp_path_factory.mktemp("reverse") / "run"
    overrides = tiny_overrides(trained_run["corpus"], run, steps=40, val_every=20)
    train(
        compose_train(
            *overrides, "data.src_lang=en", "data.tgt_lang=de", "module.optimizer.lr=3e-3", "module.warmup_steps=10"
        )
    )
    return {"corpus": trained_run["corpus"], "run": run}


def compose_inference(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=list(overrides))


@pytest.fixture
def browser():
    """Headless Debian Chromium driven by Playwright (skips where no Chromium is installed)."""
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if binary is None:
        pytest.skip("no headless Chromium on PATH (Debian: apt-get install chromium); CI installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=binary,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield b
        b.close()
