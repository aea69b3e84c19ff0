"""scripts/export.py: formats, averages, output folders and the errors a user can make."""

import io
import sys

import pytest

from qkvmt.errors import UserError
from qkvmt.pipeline.export import export
from qkvmt.pipeline.translate import translate
from tests.commandline import run_script
from tests.conftest import compose_inference

pytest.importorskip("ctranslate2", reason="the [deploy] extra (ctranslate2) is not installed")


def ckpt_of(run):
    return run["run"] / "checkpoints" / "last.ckpt"


def test_an_average_exports_and_translates(trained_run, tmp_path):
    folder = trained_run["run"] / "checkpoints"
    steps = sorted(folder.glob("step*.ckpt"))
    out = tmp_path / "avg"
    result = export(
        compose_inference("export", f"ckpt_path={steps[-1]}", f"average=[{steps[0]},{steps[-1]}]", f"output_dir={out}")
    )
    assert len(result["checkpoints"]) == 2 and (out / "model.bin").is_file()
    text = io.StringIO()
    translate(compose_inference("translate", "engine=ctranslate2", f"model_dir={out}", "sentence='w1 w2'"), stdout=text)
    assert len(text.getvalue().splitlines()) == 1


def test_default_folder_is_beside_the_run_and_never_reused(trained_run):
    a = export(compose_inference("export", f"ckpt_path={ckpt_of(trained_run)}"))["output_dir"]
    b = export(compose_inference("export", f"ckpt_path={ckpt_of(trained_run)}"))["output_dir"]
    assert a != b and all(str(trained_run["run"] / "exports") in p for p in (a, b))


@pytest.mark.parametrize(
    "override, message",
    [
        ("format=onnx", "format=ctranslate2 or format=huggingface"),
        ("quantization=int3", "quantization='int3'"),
    ],
)
def test_bad_settings_leave_no_folder(trained_run, tmp_path, override, message):
    out = tmp_path / "out"
    with pytest.raises(UserError, match=message):
        export(compose_inference("export", f"ckpt_path={ckpt_of(trained_run)}", override, f"output_dir={out}"))
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_an_output_dir_that_holds_files_is_refused(trained_run, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UserError, match="output_dir"):
        export(compose_inference("export", f"ckpt_path={ckpt_of(trained_run)}", f"output_dir={tmp_path}"))
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_missing_ctranslate2_says_how_to_install_it(trained_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 now raises ImportError
    with pytest.raises(UserError, match="CTranslate2 is not installed: pip install ctranslate2"):
        export(compose_inference("export", f"ckpt_path={ckpt_of(trained_run)}", f"output_dir={tmp_path / 'o'}"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["engine=ctranslate2"], "model_dir="),
        (["engine=ctranslate2", "model_dir=/nonexistent/folder"], "is not a folder"),
        (["engine=ctranslate2", "model_dir=.", "ckpt_path=x.ckpt"], "not ckpt_path"),
        (["engine=marian"], "engine='marian'"),
        (["compute_type=int8"], r"^compute_type=int8 is for engine=ctranslate2; engine=qkvmt computes in fabric"),
        (["engine=ctranslate2", "model_dir=.", "fabric.precision=bf16-mixed"], r"^fabric.precision=bf16-mixed is for"),
    ],
)
def test_translate_engine_settings_are_checked(overrides, message):
    with pytest.raises(UserError, match=message):
        translate(compose_inference("translate", *overrides, "sentence=x"), stdout=io.StringIO())


def test_export_script_error_is_one_line(tmp_path):
    r = run_script("export", f"ckpt_path={tmp_path / 'none.ckpt'}")
    assert (
        r.returncode == 2 and r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: checkpoint not found")
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["dtype=float16"], "dtype=float16 is for format=safetensors; format=ctranslate2 cannot take it"),
        (["format=safetensors", "quantization=int8"], "quantization=int8 is for format=ctranslate2; format=safe"),
        (["format=huggingface", "dtype=bfloat16"], "dtype=bfloat16 is for format=safetensors; format=huggingface"),
    ],
)
def test_another_formats_option_is_refused_before_the_model_loads(tmp_path, overrides, message):
    """An option the chosen format cannot take would be ignored: it is refused, before the checkpoint is read."""
    r = run_script("export", f"ckpt_path={tmp_path / 'none.ckpt'}", *overrides)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
