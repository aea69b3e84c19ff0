"""The tour notebook run again: docs/tour.ipynb executed from its first cell in a fresh kernel,
in its own folder and on the CPU (the bundled model's numbers, the same on every rerun of one
machine), and written back with its outputs, so that what a code host shows under each cell is
what the cell prints now. `qkvmt figures` calls `run_tour` (its `tour=` setting); the docs test
calls `executed` and compares the result with the saved file.

Running a notebook needs nbclient, nbformat and a Python kernel (ipykernel): the `dev` extra,
not a dependency. Without them `executed` raises Unavailable, saying what to install."""

import os
from pathlib import Path

from qkvmt.files import write_text

NEEDS = ("nbclient", "nbformat", "ipykernel")
QUIET = "ignore:IProgress not found"  # a warnings filter (python -W): action, the message's start


class Unavailable(Exception):
    """No notebook runner, or no notebook, to run."""


def executed(path, timeout: int = 600):
    """The notebook at `path` (an nbformat node), its code cells cleared and run in order in a new
    `python3` kernel whose working folder is the notebook's; a failing cell raises nbclient's
    CellExecutionError, naming the cell and its traceback."""
    path = Path(path)
    if not path.is_file():
        raise Unavailable(f"no notebook at {path}")
    try:
        import nbformat
        from jupyter_client.kernelspec import NoSuchKernel
        from nbclient import NotebookClient
    except ImportError:
        raise Unavailable(f"running {path.name} needs {', '.join(NEEDS)}: pip install -e '.[dev]'") from None
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # an earlier run's timestamps
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,  # no timestamps in the file: a rerun that prints the same changes nothing
        coalesce_streams=True,  # one stdout output a cell, however its prints were flushed
        resources={"metadata": {"path": str(path.parent)}},
    )
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",  # the CPU, as the saved outputs
        # tqdm's notice, in a kernel without ipywidgets, naming this machine's site-packages
        "PYTHONWARNINGS": ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), QUIET])),
    }
    try:
        client.execute(env=env)
    except NoSuchKernel as e:
        raise Unavailable(f"running {path.name} needs a python3 kernel: {e}") from None
    return nb


def run_tour(path, timeout: int = 600) -> Path:
    """Run the notebook at `path` again and write it back with its outputs; returns `path`."""
    import nbformat

    nb = executed(path, timeout)
    path = Path(path)
    write_text(path, nbformat.writes(nb) + "\n")  # as Jupyter saves it
    return path
