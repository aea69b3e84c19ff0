"""Self-contained checkpoints: safe loading, clear errors, averaging."""

import pickle

import pytest
import torch

from qkvmt.errors import UserError
from qkvmt.loading import average_checkpoints, load_checkpoint, load_model, resolve_average
from qkvmt.model.checkpoint import model_weights
from qkvmt.pipeline.average import average
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
    assert meta.averaged_from == [str(folder / "step0000020.ckpt"), str(folder / "step0000040.ckpt")]
    assert model(torch.tensor([[5, 6, 2]]), torch.tensor([[1]]))[0].shape[-1] == tok.get_vocab_size()


def test_asking_for_more_checkpoints_than_exist_is_a_user_error(trained_run):
    with pytest.raises(UserError, match="only 2"):
        resolve_average(trained_run["run"] / "checkpoints" / "last.ckpt", "last5")
    with pytest.raises(UserError, match="lastN"):
        resolve_average(trained_run["run"] / "checkpoints" / "last.ckpt", "best3")
    with pytest.raises(UserError, match=r"has only 0 step\*\.ckpt checkpoint\(s\); a training run's checkpoints"):
        resolve_average("multi30k-de-en", "last5")  # a bundled model: no checkpoints to average


def test_truncated_checkpoint_is_a_user_error(trained_run, tmp_path):
    data = (trained_run["run"] / "checkpoints" / "last.ckpt").read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated or corrupt"):
        load_checkpoint(tmp_path / "cut.ckpt")


class Payload:
    def __reduce__(self):
        return (open, (str(PAYLOAD_MARK), "w"))


PAYLOAD_MARK = None


@pytest.mark.parametrize("layout", ["zip", "legacy", "bare_pickle"])
def test_checkpoint_that_runs_code_when_unpickled_is_refused(layout, tmp_path):
    global PAYLOAD_MARK
    PAYLOAD_MARK = tmp_path / "pwned"
    evil = {"state_dict": {}, "qkvmt": Payload()}
    if layout == "bare_pickle":
        (tmp_path / "evil.ckpt").write_bytes(pickle.dumps(evil))
    else:
        torch.save(evil, tmp_path / "evil.ckpt", _use_new_zipfile_serialization=layout == "zip")
    # torch.save's layouts reach the import and say so; a bare pickle fails on an earlier opcode.
    match = "not plain data" if layout != "bare_pickle" else "not a readable checkpoint"
    with pytest.raises(UserError, match=match):
        load_checkpoint(tmp_path / "evil.ckpt")
    assert not PAYLOAD_MARK.exists()


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "not a readable checkpoint"),
        (b"hello\n", "not a readable checkpoint"),
        ([1, 2, 3], "not a qkvmt checkpoint (no qkvmt metadata or weights)"),
        ({"state_dict": {}, "qkvmt": {"model_config": {}}}, "no tokenizer, src_lang, tgt_lang in its metadata"),
    ],
)
def test_files_that_are_no_qkvmt_checkpoint_are_one_line_errors(content, expected, tmp_path):
    path = tmp_path / "x.ckpt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(UserError) as e:
        load_checkpoint(path)
    assert str(path) in str(e.value) and expected in str(e.value) and "\n" not in str(e.value)


def test_a_folder_as_checkpoint_says_to_pick_a_file(trained_run):
    with pytest.raises(UserError, match="is a folder; set it to a .ckpt file in it"):
        load_checkpoint(trained_run["run"] / "checkpoints")


# Each case: how to edit the stored model_config (given it), and the message expected from it.
MISFITS = {
    "ffn_dim": (
        lambda c: {"ffn_dim": 2 * c["ffn_dim"]},
        lambda c: (
            rf"ffn\.fc1\.weight is \({c['ffn_dim']}, {c['d_model']}\), "
            rf"but the stored configuration needs \({2 * c['ffn_dim']}, {c['d_model']}\)"
        ),
    ),
    "more_layers": (
        lambda c: {"encoder_layers": c["encoder_layers"] + 1},
        lambda c: rf"weights do not fit .*\(no weight encoder_layers\.{c['encoder_layers']}\.",
    ),
    "fewer_layers": (
        lambda c: {"encoder_layers": c["encoder_layers"] - 1},
        lambda c: rf"weights do not fit .*\(unexpected weight encoder_layers\.{c['encoder_layers'] - 1}\.",
    ),
    "heads": (
        lambda c: {"n_heads": c["d_model"] + 1},
        lambda c: "configuration stored in it is not usable .*not divisible",
    ),
    "unknown_key": (
        lambda c: {"colour": "red"},
        lambda c: r"configuration stored in it is not usable .*unknown model config keys: \['colour'\]",
    ),
}


@pytest.mark.parametrize("case", MISFITS)
def test_a_checkpoint_that_does_not_fit_its_own_configuration_is_a_user_error(case, trained_run, tmp_path):
    edit, expected = MISFITS[case]
    raw = torch.load(trained_run["run"] / "checkpoints" / "last.ckpt", weights_only=True)
    config = raw["qkvmt"]["model_config"]
    raw["qkvmt"]["model_config"] = {**config, **edit(config)}
    torch.save(raw, tmp_path / "edited.ckpt")
    with pytest.raises(UserError, match=expected(config)) as e:
        load_model(tmp_path / "edited.ckpt")
    assert str(e.value).startswith(str(tmp_path / "edited.ckpt"))


def test_a_checkpoint_with_an_unreadable_tokenizer_is_a_user_error(trained_run, tmp_path):
    raw = torch.load(trained_run["run"] / "checkpoints" / "last.ckpt", weights_only=True)
    raw["qkvmt"]["tokenizer"] = "{not json"
    torch.save(raw, tmp_path / "edited.ckpt")
    with pytest.raises(UserError, match=r"edited\.ckpt: the tokenizer stored in it is not readable"):
        load_model(tmp_path / "edited.ckpt")


def test_a_checkpoint_from_before_positions_were_configurable_loads_as_sinusoidal(trained_run, tmp_path):
    """Checkpoints written before model.positions existed store no such key: the same model loads."""
    last = trained_run["run"] / "checkpoints" / "last.ckpt"
    raw = torch.load(last, weights_only=True)
    del raw["qkvmt"]["model_config"]["positions"]
    torch.save(raw, tmp_path / "old.ckpt")
    old, _, _ = load_model(tmp_path / "old.ckpt")
    new, _, _ = load_model(last)
    assert old.cfg == new.cfg and old.cfg.positions == "sinusoidal"
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    with torch.no_grad():
        assert torch.equal(old(src, tgt)[0], new(src, tgt)[0])


def test_a_checkpoint_from_before_a_setting_existed_averages_and_resumes_with_a_current_one(trained_run, tmp_path):
    from qkvmt.loading import check_resumable

    folder = trained_run["run"] / "checkpoints"
    old = torch.load(folder / "step0000020.ckpt", weights_only=True)
    del old["qkvmt"]["model_config"]["positions"]  # as written before model.positions existed
    torch.save(old, tmp_path / "old.ckpt")
    averaged = average_checkpoints([tmp_path / "old.ckpt", folder / "step0000040.ckpt"])
    assert averaged["qkvmt"]["averaged_from"][0] == str(tmp_path / "old.ckpt")
    current = load_checkpoint(folder / "step0000040.ckpt")["qkvmt"]["model_config"]
    check_resumable(tmp_path / "old.ckpt", current)  # the same model: no error
    with pytest.raises(UserError, match="model.positions=sinusoidal but this run asks for model.positions=rotary"):
        check_resumable(tmp_path / "old.ckpt", current | {"positions": "rotary"})
