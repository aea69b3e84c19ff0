"""hf:ORG/NAME opens the model folder in huggingface_hub's cache, offline; what is not there, or a missing
huggingface_hub, is a one-line error that says how to give the folder itself."""

import shutil
import sys

import pytest

import qkvmt
from qkvmt.bundled import resolve
from qkvmt.errors import UserError
from tests.hf.test_tokenizers import TEXTS, whole_marian_folder

hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed")
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty hub cache, offline: nothing here may reach the network."""
    folder = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(folder))
    monkeypatch.setattr(hub.constants, "HF_HUB_CACHE", str(folder))
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", True)
    return folder


def cached(cache, repo: str, source) -> None:
    """`source`'s files as huggingface_hub lays out a downloaded snapshot of `repo`."""
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    shutil.copytree(source, root / "snapshots" / COMMIT)


def test_a_cached_hub_model_loads_and_translates_as_its_folder(tmp_path, cache):
    folder, _, _ = whole_marian_folder(tmp_path / "opus-mt-de-en")
    cached(cache, "Helsinki-NLP/opus-mt-de-en", folder)
    assert (
        resolve("hf:Helsinki-NLP/opus-mt-de-en") == cache / "models--Helsinki-NLP--opus-mt-de-en" / "snapshots" / COMMIT
    )
    model = qkvmt.load("hf:Helsinki-NLP/opus-mt-de-en", device="cpu")
    assert list(model.translate(TEXTS)) == list(qkvmt.load(folder, device="cpu").translate(TEXTS))


def test_an_uncached_hub_model_offline_is_one_line_naming_the_local_way(cache):
    with pytest.raises(UserError, match="not in huggingface_hub's cache.*give the model's folder itself") as e:
        resolve("hf:Helsinki-NLP/opus-mt-xx-yy")
    assert "\n" not in str(e.value)


def test_without_huggingface_hub_it_is_one_line_naming_the_local_way(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails as if not installed
    with pytest.raises(UserError, match="huggingface_hub is not installed.*give the model's folder itself"):
        resolve("hf:Helsinki-NLP/opus-mt-de-en")
