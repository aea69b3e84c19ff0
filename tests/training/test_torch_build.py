"""The torch build: triton is skipped before Lightning imports it where no GPU could run it, and
kept where a GPU could or where it is already imported."""

import os
import subprocess
import sys
import types

import pytest
import torch

from qkvmt.training.torch_build import skip_idle_triton
from tests.conftest import ROOT

# A stand-in for an installed triton that says when something imports it, then fails as a triton
# without its GPU libraries would, so that torch goes on without it.
FAKE_TRITON = "import os\nopen(os.environ['TRITON_IMPORTED'], 'w').close()\nraise ImportError('a stand-in')\n"

# What scripts/train.py's process imports, in its order, up to Lightning and torch._dynamo.
TRAIN_IMPORTS = """
import runpy, sys
runpy.run_path(sys.argv[1], run_name="not_main")
import lightning, torch._dynamo
print("skipped" if sys.modules.get("triton", "absent") is None else "not skipped")
"""


def _run(tmp_path, script):
    (tmp_path / "triton").mkdir(exist_ok=True)
    (tmp_path / "triton" / "__init__.py").write_text(FAKE_TRITON)
    marker = tmp_path / "imported"
    marker.unlink(missing_ok=True)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src"), str(ROOT)]),
                        "TRITON_IMPORTED": str(marker), "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-c", TRAIN_IMPORTS, str(script)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip(), marker.exists()


@pytest.mark.parametrize("script", ["train.py", "benchmark.py"])  # the benchmark measures the recipe's process
def test_the_training_scripts_skip_triton_before_lightning_imports_it(tmp_path, script):
    """With a triton installed and no GPU, scripts/train.py's process never imports it; a script
    that imports Lightning without the skip does (the probe sees an import)."""
    assert _run(tmp_path, ROOT / "scripts" / script) == ("skipped", False)
    plain = tmp_path / "plain.py"
    plain.write_text("import lightning\n")
    assert _run(tmp_path, plain) == ("not skipped", True)


def test_triton_is_kept_with_a_gpu_or_once_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, "triton", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert skip_idle_triton() is False and "triton" not in sys.modules
    already = types.ModuleType("triton")
    monkeypatch.setitem(sys.modules, "triton", already)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert skip_idle_triton() is False and sys.modules["triton"] is already
    monkeypatch.delitem(sys.modules, "triton")
    assert skip_idle_triton() is True and sys.modules["triton"] is None
    assert skip_idle_triton() is True  # asked again: still skipped
