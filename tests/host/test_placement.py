"""Placing a loaded model (qkvmt.host.placement): float32 on the CPU without Lightning; a fresh process
loading and translating with an imported or a bundled model imports neither Lightning nor matplotlib, and
translates as a Lightning Fabric places the model."""

import json

import lightning as L
import pytest

from qkvmt.api import Model
from qkvmt.bundled import resolve
from tests.commandline import start_python

pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[hf]')")

# a user's script: load, translate, and which of the heavy imports it made
LOAD_AND_TRANSLATE = (
    "import json, sys, qkvmt; model = qkvmt.load(sys.argv[1], device=sys.argv[2]); "
    "print(json.dumps({'translations': list(model.translate(json.loads(sys.argv[3]))), "
    "'heavy': [name for name in ('lightning', 'matplotlib') if name in sys.modules]}))"
)


@pytest.fixture(params=["imported", "bundled"])
def model(request, tmp_path) -> tuple[str, list[str]]:
    """A model's path and sentences it translates into words."""
    if request.param == "bundled":
        return "multi30k-de-en", ["Ein Mann fährt Fahrrad .", "Zwei Hunde spielen im Schnee ."]
    from tests.hf.test_tokenizers import TEXTS, whole_marian_folder

    return str(whole_marian_folder(tmp_path / "opus-mt-de-en", eos_bias=0.0)[0]), TEXTS


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_loading_and_translating_on_the_cpu_imports_no_lightning_and_translates_as_its_fabric_places(model, device):
    path, sentences = model
    if device == "auto" and (L.Fabric(accelerator="auto", devices=1).device.type != "cpu"):
        pytest.skip("device=auto is not the CPU on this machine")
    proc = start_python("-c", LOAD_AND_TRANSLATE, path, device, json.dumps(sentences))
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["heavy"] == []  # imported when a command trains or a result draws, not before
    fabric = L.Fabric(accelerator="cpu", devices=1, precision="32-true")
    expected = Model.from_checkpoints([resolve(path)], fabric).translate(sentences)
    assert out["translations"] == list(expected) and all(expected)
