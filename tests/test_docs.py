"""The documentation runs: the README's Python API example, and docs/tour.ipynb executed cell by
cell in a real Jupyter kernel (nbclient), each on a tiny trained model."""

import re
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT


def readme_api_example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Python API"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readmes_api_example_runs_as_written(trained_run, tmp_path):
    code = readme_api_example()
    path = re.search(r'qkvmt\.load\("([^"]+)"\)', code).group(1)
    code = code.replace(f'"{path}"', repr(str(trained_run["run"])))  # the README's run folder: ours is elsewhere
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "->" in r.stdout  # the example prints what it found
    assert any(tmp_path.rglob("alignment.html"))  # and saves a result


def test_the_tour_notebook_runs_in_a_kernel(trained_run, tmp_path, monkeypatch):
    monkeypatch.setenv("QKVMT_TOUR_CKPT", str(trained_run["run"] / "checkpoints" / "last.ckpt"))
    nb = nbformat.read(ROOT / "docs" / "tour.ipynb", as_version=4)
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "docs")}}).execute()
    except Exception as e:  # nbclient's CellExecutionError names the cell and the traceback
        pytest.fail(f"a cell of docs/tour.ipynb failed:\n{e}")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    pages = [o for c in code for o in c.outputs if "text/html" in o.get("data", {})]
    assert len(pages) >= 4 and all(o["data"]["text/html"].startswith("<iframe srcdoc=") for o in pages)
