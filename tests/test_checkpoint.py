"""Self-contained checkpoints: safe loading, clear errors, averaging."""

import torch

import pytest

from qkvmt.checkpoint import average_checkpoints, load_checkpoint, load_model, model_weights, resolve_average
from qkvmt.errors import UserError
from qkvmt.pipeline import average
from tests.conftest import compose_inference


def test_averaged_weights_are_the_mean(trained_run):
    folder = trained_run["run"] / "checkpoints"
    paths = resolve_average(folder / "last.ckpt", "last2")
    assert [p.name for p in paths] == ["step0000020.ckpt", "step0000040.ckpt"]
    a, b = (model_weights(load_checkpoint(p)) for p in paths)
    avg = model_weights(average_checkpoints(paths))
    for k in a:
        assert torch.allclose(avg[k], (a[k] + b[k]) / 2, atol=1e-6)


def test_average_script_writes_a_checkpoint_that_loads(trained_run, tmp_path):
    folder = trained_run["run"] / "checkpoints"
    out = tmp_path / "avg.ckpt"
    average(compose_inference("average", f"ckpt_path={folder / 'last.ckpt'}", "average=last2", f"output={out}"))
    model, tok, meta = load_model(out)
    assert meta["averaged_from"] == [str(folder / "step0000020.ckpt"), str(folder / "step0000040.ckpt")]
    assert model(torch.tensor([[5, 6, 2]]), torch.tensor([[1]]))[0].shape[-1] == tok.get_vocab_size()


def test_asking_for_more_checkpoints_than_exist_is_a_user_error(trained_run):
    with pytest.raises(UserError, match="only 2"):
        resolve_average(trained_run["run"] / "checkpoints" / "last.ckpt", "last5")
    with pytest.raises(UserError, match="lastN"):
        resolve_average(trained_run["run"] / "checkpoints" / "last.ckpt", "best3")


def test_truncated_checkpoint_is_a_user_error(trained_run, tmp_path):
    data = (trained_run["run"] / "checkpoints" / "last.ckpt").read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "cut.ckpt")


class Payload:
    def __reduce__(self):
        return (open, (str(PAYLOAD_MARK), "w"))


PAYLOAD_MARK = None


def test_checkpoint_that_runs_code_when_unpickled_is_refused(tmp_path):
    global PAYLOAD_MARK
    PAYLOAD_MARK = tmp_path / "pwned"
    torch.save({"state_dict": {}, "qkvmt": Payload()}, tmp_path / "evil.ckpt")
    with pytest.raises(UserError, match="not plain data"):
        load_checkpoint(tmp_path / "evil.ckpt")
    assert not PAYLOAD_MARK.exists()
