"""Training end to end: outputs, checkpoints, resume, data sources, DDP, multirun and errors."""

import csv
import dataclasses
import functools
import json
import logging
import os
import sys
from pathlib import Path
from unittest.mock import patch

import pytest
import torch

import qkvmt.pipeline.train
from qkvmt.cli.main import app
from qkvmt.errors import UserError
from qkvmt.host.hardware import Hardware, choose_precision, detect
from qkvmt.loading import load_model
from qkvmt.pipeline.train import train
from qkvmt.text.tokenizer import Specials
from qkvmt.training.progress import StepProgress
from tests.commandline import run_python, run_script, start_python, user_error
from tests.conftest import (
    MULTI30K,
    ROOT,
    compose_inference,
    compose_train,
    free_port,
    requires_multi30k,
    tiny_overrides,
    write_corpus,
)
from tests.test_bad_input import train_args


def read_csv(run: Path) -> list[dict]:
    with open(run / "csv" / "metrics.csv") as f:
        return list(csv.DictReader(f))


def logged(rows: list[dict], key: str) -> list[float]:
    return [float(r[key]) for r in rows if r.get(key)]


@pytest.mark.slow
def test_train_writes_checkpoints_logs_and_test_scores(corpus, tmp_path):
    out = tmp_path / "run"
    metrics = train(compose_train(*tiny_overrides(corpus, out)))
    assert {"best.ckpt", "last.ckpt"} <= {p.name for p in (out / "checkpoints").iterdir()}
    assert (out / "tokenizer.json").exists() and (out / "train_metrics.json").exists()
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    rows = read_csv(out)
    assert len(logged(rows, "val/bleu")) == 2  # every 4 steps of 8
    assert logged(rows, "train/tgt_tok_s") and logged(rows, "train/lr")
    assert metrics["steps"] == 8 and "nrefs:1|case:mixed" in metrics["signatures"]["bleu"]
    assert 0.0 <= metrics["test_bleu"] <= 100.0
    model, _, _ = load_model(out / "checkpoints" / "last.ckpt")
    assert metrics["parameters"] == sum(p.numel() for p in model.parameters())  # the tied embedding once
    memory = metrics["host_memory"]  # one process: one figure each, at both validations
    assert list(memory["rss_mb_at_step"]) == ["4", "8"]
    assert len(memory["peak_rss_mb"]) == len(memory["end_rss_mb"]) == 1
    # the kernel updates the high-water mark lazily: it may trail a reading by a few pages
    assert memory["peak_rss_mb"][0] >= max(memory["end_rss_mb"][0], *memory["rss_mb_at_step"]["8"]) - 4 > 100


@pytest.mark.slow
def test_checkpoint_alone_rebuilds_model_and_tokenizer(corpus, tmp_path):
    out = tmp_path / "run"
    train(compose_train(*tiny_overrides(corpus, out, steps=4)))
    ckpt = out / "checkpoints" / "last.ckpt"
    raw = torch.load(ckpt, weights_only=True)  # plain data only
    assert raw["qkvmt"]["src_lang"] == "de" and raw["qkvmt"]["tgt_lang"] == "en"
    (out / "tokenizer.json").unlink()  # the file alone must suffice
    model, tok, meta = load_model(ckpt)
    src = torch.tensor([tok.encode("w1 w2 w3").ids + [2]])
    assert model(src, torch.tensor([[1, 5, 6]]))[0].shape == (1, 3, tok.get_vocab_size())
    weights = {k.removeprefix("model."): v for k, v in raw["state_dict"].items()}
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())


@pytest.mark.slow
def test_rerun_in_the_same_folder_resumes_with_the_saved_tokenizer(corpus, tmp_path):
    out = tmp_path / "run"
    train(compose_train(*tiny_overrides(corpus, out, steps=4)))
    stamp = (out / "tokenizer.json").stat().st_mtime_ns
    with pytest.raises(
        UserError, match=r"tokenizer.json was made with other settings \(data.vocab_size=120 there, 90 asked\)"
    ):
        train(compose_train(*tiny_overrides(corpus, out, steps=8), "data.vocab_size=90"))
    metrics = train(compose_train(*tiny_overrides(corpus, out, steps=8)))
    assert metrics["steps"] == 8
    assert (out / "tokenizer.json").stat().st_mtime_ns == stamp  # not retrained
    steps = [int(r["step"]) for r in read_csv(out) if r.get("train/loss")]
    assert steps and min(steps) >= 4  # the second run continued after step 4


@pytest.mark.slow
def test_train_script_returns_the_optimized_metric_for_hydra_sweepers(corpus, tmp_path):
    cfg = compose_train(*tiny_overrides(corpus, tmp_path / "run", steps=4), "optimized_metric=best_val_bleu")
    value = app("train")(cfg)  # Hydra passes a given config straight through, as a sweeper's job does
    assert value == json.loads((tmp_path / "run" / "train_metrics.json").read_text())["best_val_bleu"]
    with pytest.raises(UserError, match=r"optimized_metric=bleu: use one of test_bleu, test_chrf, best_val_bleu"):
        train(compose_train(*tiny_overrides(corpus, tmp_path / "typo", steps=4), "optimized_metric=bleu"))
    assert not (tmp_path / "typo").exists()  # refused before anything was written


@pytest.mark.slow
def test_training_from_a_hugging_face_dataset_offline(tmp_path):
    datasets = pytest.importorskip("datasets")
    files = write_corpus(tmp_path / "files", gz=False)
    folder = tmp_path / "hf"
    folder.mkdir()
    for split, hf_split in (("train", "train"), ("val", "validation"), ("test_2016_flickr", "test")):
        de = (files / f"{split}.de").read_text().splitlines()
        en = (files / f"{split}.en").read_text().splitlines()
        rows = [{"translation": {"de": d, "en": e}} for d, e in zip(de, en)]
        datasets.Dataset.from_list(rows).to_parquet(str(folder / f"{hf_split}.parquet"))
    out = tmp_path / "run"
    cfg = compose_train(*tiny_overrides(tmp_path / "hf_cache", out, steps=4), "data=hf", f"data.source.path={folder}")
    assert train(cfg)["steps"] == 4
    # evaluate.py split= reads the run's own source: "val" is the dataset's "validation" split
    from qkvmt.pipeline.evaluate import evaluate

    metrics = evaluate(
        compose_inference(
            "evaluate",
            f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}",
            "split=val",
            "decode.beam_size=1",
            "attention.num_samples=0",
            f"output_dir={tmp_path / 'eval'}",
        )
    )
    hyps = (tmp_path / "eval" / "hypotheses.txt").read_text().splitlines()
    assert metrics["n"] == len(hyps) == len((files / "val.en").read_text().splitlines())


def cli(overrides: list[str]) -> list[str]:
    return [o for o in overrides if not o.startswith("paths.output_dir")]


@pytest.mark.slow
@pytest.mark.parametrize("fails", [False, True])
def test_a_run_closes_the_process_group_it_formed_however_it_ends(corpus, tmp_path, monkeypatch, fails):
    """A process that exits with its gloo group open can abort as Python shuts down, failing a run
    that finished: train() leaves none open, after success or an error."""
    from qkvmt.pipeline import train as pipeline

    formed = []

    def failing_test(trainer, *args):
        formed.append(torch.distributed.is_initialized())
        raise RuntimeError("the test step failed")

    if fails:
        monkeypatch.setattr(pipeline, "run_test", failing_test)
    cfg = compose_train(*tiny_overrides(corpus, tmp_path / "run", steps=2, val_every=2), "trainer.strategy=ddp")
    # DDP in this process leaves LOCAL_RANK and NODE_RANK in os.environ, and a later test's DDP run
    # would take them for an outside launcher's and wait for a rank no one starts: patch.dict puts
    # os.environ back as it was, keys added since included.
    with patch.dict(os.environ, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "1"}):
        if fails:
            with pytest.raises(RuntimeError, match="the test step failed"):
                train(cfg)
            assert formed == [True]
        else:
            assert train(cfg)["steps"] == 2
    assert not torch.distributed.is_initialized()


@pytest.mark.slow
def test_multirun_sweeps_into_numbered_folders(corpus, tmp_path):
    sweep = tmp_path / "sweep"
    r = run_python(
        "scripts/train.py",
        "-m",
        *cli(tiny_overrides(corpus, tmp_path, steps=2, val_every=2)),
        "model.dropout=0.0,0.2",
        f"hydra.sweep.dir={sweep}",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert {p.name for p in sweep.iterdir() if p.is_dir()} >= {"0", "1"}
    for job in ("0", "1"):
        assert (sweep / job / "checkpoints" / "last.ckpt").exists()


def test_a_missing_data_folder_is_a_one_line_error(tmp_path):
    r = run_python(  # no download: the missing folder must be reported, not fetched
        "scripts/train.py",
        *cli(tiny_overrides(tmp_path / "missing", tmp_path)),
        "data.source.download_url=null",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: ") and "data.root" in r.stderr


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml")))
def test_every_experiment_composes_into_a_model_config(experiment, tmp_path):
    from hydra.utils import instantiate

    cfg = compose_train(f"experiment={experiment}", f"paths.output_dir={tmp_path}")
    model_cfg = instantiate(cfg.model)(vocab_size=100)
    assert model_cfg.d_model % model_cfg.n_heads == 0
    assert cfg.data.max_tokens > 0 and cfg.trainer.max_steps > 0


@pytest.mark.slow
@requires_multi30k
def test_tiny_model_learns_on_real_multi30k(tmp_path):
    out = tmp_path / "real"
    cfg = compose_train(
        "experiment=multi30k_de_en",
        "model=tiny",
        f"data.root={MULTI30K}",
        f"data.cache_dir={out / 'cache'}",
        f"paths.output_dir={out}",
        "trainer.max_steps=40",
        "trainer.val_check_interval=20",
        "trainer.log_every_n_steps=5",
        "data.max_tokens=2048",
        "module.warmup_steps=20",
        "module.test_decode.beam_size=1",
        "trainer.enable_progress_bar=false",
    )
    train(cfg)
    assert (out / "checkpoints" / "last.ckpt").exists() and (out / "checkpoints" / "best.ckpt").exists()
    rows = read_csv(out)
    losses = logged(rows, "train/loss")
    assert losses[-1] < losses[0] - 1.0
    assert len(logged(rows, "val/bleu")) == 2


def test_early_stopping_is_optional_and_watches_validation_bleu(tmp_path):
    from hydra.utils import instantiate
    from lightning.pytorch.callbacks import EarlyStopping

    default = compose_train(f"paths.output_dir={tmp_path}")
    assert not any(c and "EarlyStopping" in c["_target_"] for c in default.callbacks.values())
    cfg = compose_train(
        f"paths.output_dir={tmp_path}", "callbacks=early_stopping", "callbacks.early_stopping.patience=3"
    )
    stop = instantiate(cfg.callbacks.early_stopping)
    assert isinstance(stop, EarlyStopping) and stop.monitor == "val/bleu" and stop.patience == 3


@pytest.mark.slow
def test_each_epoch_sees_a_new_batch_order(corpus, tmp_path):
    import lightning as L
    from hydra.utils import instantiate

    cfg = compose_train(*tiny_overrides(corpus, tmp_path))
    dm = instantiate(cfg.data)
    tok = dm.load_tokenizer(tmp_path / "tokenizer.json")
    model_cfg = instantiate(cfg.model)(vocab_size=tok.get_vocab_size(), **Specials.of(tok).config_fields())
    module = instantiate(cfg.module)(model_config=model_cfg, tokenizer=tok)
    seen: dict[int, list] = {}

    class Record(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            seen.setdefault(trainer.current_epoch, []).append(batch["index"].tolist())

    trainer = L.Trainer(
        accelerator="cpu",
        max_epochs=2,
        limit_val_batches=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,
        callbacks=[Record()],
    )
    trainer.fit(module, datamodule=dm)
    assert seen[0] != seen[1]
    assert sorted(i for b in seen[0] for i in b) == sorted(i for b in seen[1] for i in b)  # same sentences


def test_a_user_error_inside_a_configured_object_is_one_line(corpus, tmp_path):
    r = run_python(
        "scripts/train.py",
        *cli(tiny_overrides(corpus, tmp_path)),
        "model.n_heads=3",
        f"hydra.run.dir={tmp_path / 'run'}",
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1] == "error: model.d_model=64 is not divisible by model.n_heads=3"


TRAIN_MODULE = sys.modules["qkvmt.pipeline.train"]  # the package's `train` attribute is the function


def progress_overrides(corpus: Path, out: Path, **kw) -> list[str]:
    return [o for o in tiny_overrides(corpus, out, **kw) if "enable_progress_bar" not in o]


@pytest.mark.slow
def test_first_lines_say_run_folder_experiment_and_precision_then_progress_in_steps(
    corpus, tmp_path, caplog, monkeypatch
):
    # every_s=0: a progress line after every step, as a log file gets one every minute
    monkeypatch.setattr(TRAIN_MODULE, "StepProgress", functools.partial(StepProgress, every_s=0, interactive=False))
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="qkvmt"):
        metrics = train(compose_train(*progress_overrides(corpus, out)))
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("qkvmt")]
    expected, why = choose_precision("auto", detect("cpu"))
    assert lines[:3] == [
        f"run folder: {out}",
        "experiment multi30k_de_en: " + compose_train().description,
        f"precision {expected}: {why}",
    ]
    steps = [line for line in lines if line.startswith("step ")]
    assert [line.split(" · ")[0] for line in steps] == [f"step {i}/8 ({100 * i / 8:.0f}%)" for i in range(1, 9)]
    assert all("loss " in line and "left" in line for line in steps[1:])
    assert [line.split(":")[0] for line in lines if line.startswith("validation")] == [
        "validation at step 4",
        "validation at step 8",
    ]
    recorded = json.loads((out / "run.json").read_text())
    assert recorded["precision"] == metrics["precision"] == expected
    assert recorded["hardware"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


@pytest.mark.slow
def test_a_cpu_with_native_bf16_trains_in_bf16_and_an_explicit_precision_wins(corpus, tmp_path, monkeypatch):
    amx = Hardware("cpu", "Intel Xeon", "AVX512", cpu_native_bf16=True)
    monkeypatch.setattr(TRAIN_MODULE, "detect", lambda accelerator: amx)
    metrics = train(compose_train(*tiny_overrides(corpus, tmp_path / "auto", steps=2, val_every=2)))
    assert metrics["precision"] == "bf16-mixed"
    metrics = train(
        compose_train(*tiny_overrides(corpus, tmp_path / "given", steps=2, val_every=2), "trainer.precision=32-true")
    )
    assert (metrics["precision"], metrics["precision_reason"]) == ("32-true", "set by trainer.precision")


@pytest.mark.slow
def test_a_run_logged_to_a_file_has_a_clean_console(corpus, tmp_path):
    # A process of its own: the console of a whole run, every library's output included.
    out = tmp_path / "run"
    r = start_python("scripts/train.py", *cli(progress_overrides(corpus, out)), f"hydra.run.dir={out}", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    console = r.stdout + r.stderr  # Hydra's log lines go to stdout, Lightning's to stderr
    assert "Warning" not in console and "💡" not in console, console
    assert "Trainable params" in console and "FLOPs" not in console  # the summary, without a column of zeros
    assert f"run folder: {out}" in r.stdout.splitlines()[0]
    assert "validation at step 8: BLEU" in r.stdout and "training ended at step 8" in r.stdout
    assert "training ended at step 8" in (out / "train.log").read_text()  # the log file has the progress too


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_without_a_gpu_train_runs_the_cpu_recipe(tmp_path):
    r = run_python("scripts/train.py", "--cfg", "job", "--resolve", f"hydra.run.dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "running experiment=multi30k_de_en_cpu" in r.stderr
    assert "experiment_name: multi30k_de_en_cpu" in r.stdout.splitlines()


@pytest.mark.slow
def test_test_checkpoint_lastn_tests_the_average_of_the_final_weights_and_the_latest_checkpoints(corpus, tmp_path):
    out = tmp_path / "run"
    metrics = train(compose_train(*tiny_overrides(corpus, out, steps=8, val_every=2), "test_checkpoint=last3"))
    ckpts = out / "checkpoints"
    # step 8 is both the newest step checkpoint and last.ckpt: counted once
    assert [Path(p).name for p in metrics["averaged_from"]] == ["step0000004.ckpt", "step0000006.ckpt", "last.ckpt"]
    assert metrics["test_checkpoint"] == str(ckpts / "averaged_last3.ckpt")
    averaged = torch.load(ckpts / "averaged_last3.ckpt", weights_only=True)["state_dict"]
    parts = [torch.load(p, weights_only=True)["state_dict"] for p in metrics["averaged_from"]]
    for key, value in averaged.items():
        torch.testing.assert_close(value, sum(p[key] for p in parts) / 3)


def test_a_bad_test_checkpoint_is_refused_before_anything_is_written(corpus, tmp_path):
    out = tmp_path / "run"
    r = run_python(
        "scripts/train.py", *cli(tiny_overrides(corpus, out)), "test_checkpoint=lats5", f"hydra.run.dir={out}"
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: test_checkpoint=lats5")
    assert not (out / "tokenizer.json").exists() and not (out / "checkpoints").exists()


@pytest.mark.parametrize(
    "device, overrides, message",
    [
        (
            "cpu",
            ["module.compile=true", "module.compile_mode=reduce-overhead"],
            "module.compile_mode=reduce-overhead replays CUDA graphs, and this run has no CUDA device (cpu)",
        ),
        (
            "cuda",  # as detected on a GPU machine: the settings' own refusal, not the device's
            ["module.compile=true", "module.compile_mode=reduce-overhead", "trainer.accumulate_grad_batches=4"],
            "module.compile_mode=reduce-overhead with trainer.accumulate_grad_batches=4",
        ),
        (
            "cpu",
            ["module.compile=true", "module.alignment.weight=1.0"],
            "module.compile=true: an alignment-supervised step (module.alignment.weight > 0) is not compiled",
        ),
    ],
)
def test_a_compiled_step_that_could_not_run_as_asked_is_refused_before_anything_is_written(
    corpus, tmp_path, monkeypatch, device, overrides, message
):
    detected = detect("cpu")
    monkeypatch.setattr(qkvmt.pipeline.train, "detect", lambda _: dataclasses.replace(detected, device=device))
    out = tmp_path / "run"
    with pytest.raises(UserError) as e:
        train(compose_train(*tiny_overrides(corpus, out), *overrides))
    assert str(e.value).startswith(message) and not out.exists()


@pytest.mark.slow
def test_the_linear_schedule_warms_up_then_reaches_zero_with_the_step_budget(corpus, tmp_path):
    out = tmp_path / "run"
    steps, warmup, peak = 12, 4, 2e-3
    train(
        compose_train(
            *tiny_overrides(corpus, out, steps=steps), "module.lr_schedule=linear", f"module.optimizer.lr={peak}"
        )
    )
    rows = [r for r in read_csv(out) if r.get("train/lr")]
    lr = {int(r["step"]): float(r["train/lr"]) for r in rows}  # the lr each step trained with
    expected = {d: peak * ((d + 1) / warmup if d < warmup else (steps - d) / (steps - warmup)) for d in range(steps)}
    assert lr == pytest.approx(expected, rel=1e-5)


def test_alignment_supervision_teaches_one_head_eflomal_links_and_the_checkpoint_records_it(supervised_run):
    run = supervised_run["run"]
    align_loss = logged(read_csv(run), "train/align_loss")
    assert len(align_loss) == 60 and sum(align_loss[-10:]) < sum(align_loss[:10])  # the head learns the links
    meta = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["qkvmt"]
    assert meta["alignment"] == {
        "weight": 1.0,
        "layer": 1,
        "head": 1,
        "full_context": True,
        "labels": "grow-diag-final-and",
        "aligner": "eflomal",
    }
    assert len(list((run / "cache").glob("links_*.npz"))) == 1  # eflomal ran once, its links kept beside the ids


@pytest.mark.slow
def test_rotary_positions_train_through_the_pipeline(corpus, tmp_path):
    """model.positions=rotary, set as on the command line: the run trains and tests, and its
    checkpoint rebuilds a rotary model, with no table added to its embeddings."""
    out = tmp_path / "run"
    metrics = train(compose_train(*tiny_overrides(corpus, out, steps=4, val_every=4), "model.positions=rotary"))
    assert metrics["steps"] == 4 and 0.0 <= metrics["test_bleu"] <= 100.0
    model, _, _ = load_model(out / "checkpoints" / "last.ckpt")
    assert model.cfg.positions == "rotary" and model.src_embed.positions is None
    assert all(layer.self_attn.positions is not None for layer in [*model.encoder_layers, *model.decoder_layers])


@pytest.mark.parametrize(
    "setting, line",
    [
        ("seed=-1", "seed=-1: give a whole number from 0 to 4,294,967,295"),
        ("resume=true", "resume=true: no such checkpoint; give a .ckpt file of this run, auto (its last), or null"),
    ],
)
def test_a_seed_or_resume_that_is_no_such_thing_is_one_line_and_leaves_no_run_folder(setting, line, tmp_path):
    """Each was a traceback (numpy's seed bounds; a flag where a path goes) that left the run folder behind."""
    corpus, out = write_corpus(tmp_path / "corpus"), tmp_path / "run"
    r = run_script("train", *train_args(corpus, out, setting))
    assert user_error(r).startswith(f"error: {line}")
    assert not out.exists()
