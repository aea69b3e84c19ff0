"""What the inference commands share: here, reading a run's validation curve."""

from qkvmt.pipeline.inference import validation_curve


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
