"""init_from: a run that starts from a trained model's weights and tokenizer (fine-tuning)."""

import json

import pytest
import torch

from qkvmt.errors import UserError
from qkvmt.loading import load_checkpoint
from qkvmt.model.checkpoint import model_weights
from qkvmt.pipeline.train import train
from tests.conftest import compose_train, tiny_overrides, training_fixture
from tests.pipeline.test_bundle import bundled_from
from tests.pipeline.test_train import logged, read_csv


def started_from(trained_run, out, *more: str) -> dict:
    best = trained_run["run"] / "checkpoints" / "best.ckpt"
    overrides = tiny_overrides(trained_run["corpus"], out, steps=2, val_every=2)
    return train(compose_train(*overrides, f"init_from={best}", "module.warmup_steps=1", *more))


@training_fixture(scope="module")
def still_run(trained_run, tmp_path_factory):
    """A run started from trained_run's best checkpoint with a zero lr: it learns nothing, and its
    data.vocab_size (90) would give a tokenizer of its own if the start's were not kept."""
    out = tmp_path_factory.mktemp("still") / "run"
    started_from(trained_run, out, "module.optimizer.lr=0.0", "data.vocab_size=90")
    return {"run": out, "corpus": trained_run["corpus"], "start": trained_run["run"] / "checkpoints" / "best.ckpt"}


def test_with_a_zero_lr_the_run_keeps_the_models_weights_and_tokenizer(trained_run, still_run):
    """What the run trains from is the model as it was: with nothing learned, its final weights
    are the start's exactly, and its tokenizer is the start's, not one trained on the data."""
    out, start = still_run["run"], still_run["start"]
    before, after = model_weights(load_checkpoint(start)), model_weights(load_checkpoint(out / "checkpoints/last.ckpt"))
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert (out / "tokenizer.json").read_text() == (trained_run["run"] / "tokenizer.json").read_text()
    record = json.loads((out / "run.json").read_text())["init_from"]
    assert record["path"] == str(start) and record["provenance"] is None  # a run's checkpoint records none


def test_a_bundled_fine_tuned_model_records_the_model_it_started_from(still_run, tmp_path):
    bundled_from(still_run, tmp_path / "shelf", "toy-tuned")
    provenance = json.loads((tmp_path / "shelf" / "toy-tuned" / "qkvmt.json").read_text())["provenance"]
    recorded = json.loads((still_run["run"] / "run.json").read_text())["init_from"]
    assert provenance["init_from"] == recorded and recorded["path"] == str(still_run["start"])


def test_training_continues_where_the_model_left_off(trained_run, tmp_path):
    """Its first steps' loss is where the model's training ended, not a fresh model's."""
    out = tmp_path / "run"
    started_from(trained_run, out, "module.optimizer.lr=1e-3")
    fresh = logged(read_csv(trained_run["run"]), "train/loss")
    started = logged(read_csv(out), "train/loss")
    assert len(started) == 2 and max(started) < min(fresh[:10])  # below all of the fresh run's first steps
    assert max(started) <= max(fresh[-10:])  # within its last steps' range


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.d_model=32", r"holds a model with model.d_model=64 but this run asks for model.d_model=32"),
        ("data.src_lang=en", r"translates de->en, but this run's data is en->de"),
    ],
)
def test_another_architecture_or_language_pair_is_refused_before_anything_is_written(
    trained_run, tmp_path, override, message
):
    out = tmp_path / "run"
    more = [override, "data.tgt_lang=de"] if override.startswith("data") else [override]
    with pytest.raises(UserError, match=message):
        started_from(trained_run, out, *more)
    assert not out.exists()


def test_dropout_may_differ(trained_run, tmp_path):
    metrics = started_from(trained_run, tmp_path / "run", "model.dropout=0.3")
    assert metrics["steps"] == 2


def test_a_missing_model_is_a_one_line_error_naming_it(corpus, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"init_from=nowhere/model.ckpt: no checkpoint, model folder or bundled model"):
        train(compose_train(*tiny_overrides(corpus, out), "init_from=nowhere/model.ckpt"))
    assert not out.exists()


def test_an_empty_folder_or_one_without_the_model_files_says_what_it_lacks(corpus, tmp_path):
    out = tmp_path / "run"
    empty, partial = tmp_path / "empty", tmp_path / "partial"
    empty.mkdir()
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"")
    for folder, held in ((empty, "an empty folder"), (partial, "a folder without tokenizer.json, qkvmt.json")):
        with pytest.raises(UserError) as refused:
            train(compose_train(*tiny_overrides(corpus, out), f"init_from={folder}"))
        assert str(refused.value) == (
            f"init_from={folder}: {folder} is {held}: give a model folder (model.safetensors, tokenizer.json and "
            "qkvmt.json, as qkvmt export format=safetensors writes it), a Hugging Face model's folder, a .ckpt "
            "file such as a run's checkpoints/best.ckpt, or a bundled model's name"
        )
        assert not out.exists()
