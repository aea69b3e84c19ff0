"""What the inference commands share: here, reading a run's validation curve."""

from qkvmt.training_run import validation_curve


def test_validation_curve_reads_the_runs_csv_log(tmp_path):
    run = tmp_path / "run"
    (run / "csv").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    (run / "csv" / "metrics.csv").write_text(
        "epoch,step,train/loss,val/bleu,val/chrf\n"
        "0,49,5.1,,\n"
        "0,499,,13.5,31.0\n"
        "1,999,,29.0,\n"
        "1,999,,30.5,49.5\n"  # validated again after a resume: the last value counts
        "x,not-a-step,,1.0,2.0\n"  # damaged: skipped
    )
    ckpt = run / "checkpoints" / "last.ckpt"
    assert validation_curve(ckpt) == [
        {"step": 500, "bleu": 13.5, "chrf": 31.0},  # the step of step0000500.ckpt and of the console line
        {"step": 1000, "bleu": 30.5, "chrf": 49.5},
    ]
    assert validation_curve(tmp_path / "elsewhere" / "x.ckpt") == []


def test_a_run_recorded_before_the_package_moved_names_classes_that_still_import(tmp_path):
    import json

    from hydra.utils import get_class

    from qkvmt.training_run import run_data

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    old = {
        "_target_": "qkvmt.data.TranslationDataModule",
        "root": "/data",
        "source": {"_target_": "qkvmt.sources.TextFiles", "_partial_": True},
    }
    (run / "run.json").write_text(json.dumps({"data": old}))
    data = run_data(run / "checkpoints" / "best.ckpt")
    assert data["root"] == "/data" and data["source"]["_partial_"] is True
    for target in (data["_target_"], data["source"]["_target_"]):
        get_class(target)  # imports: the old dotted paths would not


def test_a_result_beside_a_model_folder_is_named_by_its_files(tmp_path):
    """A bundled or exported model is a folder: its results are keyed by a digest of its files,
    which changes when any of them does."""
    from omegaconf import OmegaConf

    from qkvmt.pipeline.inference_setup import beside_checkpoint

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "qkvmt.json").write_text("{}")
    cfg = OmegaConf.create({"paths": {"log_dir": str(tmp_path / "outputs")}})
    first = beside_checkpoint(cfg, [folder], "heads")
    assert first == beside_checkpoint(cfg, [folder], "heads") and first.parent == tmp_path  # beside the folder
    (folder / "qkvmt.json").write_text('{"changed": true}')
    assert beside_checkpoint(cfg, [folder], "heads") != first
