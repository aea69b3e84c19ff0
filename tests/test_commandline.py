"""tests.commandline: a script run in this Python answers as it does in a process of its own, and
leaves this process as it found it, so the tests that run commands here prove what they did when
each started a Python."""

import logging
import os
import sys

import pytest
from hydra.core.global_hydra import GlobalHydra

from tests.commandline import run_python, start_python

# Python and native writes to both streams, stdin, logging set up as a script does, the state a
# command may change (environment, folder, argv, root logger), and an exception nobody catches.
SCRIPT = """\
import logging, os, sys
print("from python")
sys.stdout.flush()
os.write(1, b"from native code\\n")
print("to stderr", file=sys.stderr)
print("read", sys.stdin.readline().strip(), "ü")
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
logging.getLogger("qkvmt.probe").info("logged")
os.environ["QKVMT_PROBE"] = "set"
os.chdir(os.sep)
sys.argv.append("more")
print("hydra_full_error", os.environ.get("HYDRA_FULL_ERROR"))
raise ValueError("nobody catches this")
"""


def test_a_script_answers_here_as_in_a_process_of_its_own(tmp_path, monkeypatch):
    (tmp_path / "probe.py").write_text(SCRIPT)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")  # a developer's setting that users do not have
    here = run_python("probe.py", "an argument", stdin="given\n".encode(), cwd=tmp_path)
    there = start_python("probe.py", "an argument", stdin="given\n".encode(), cwd=tmp_path)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)
    assert here.returncode == 1
    assert here.stdout == "from python\nfrom native code\nread given ü\nhydra_full_error None\n"
    assert here.stderr.startswith("to stderr\nINFO logged\nTraceback (most recent call last):\n")
    assert here.stderr.endswith("ValueError: nobody catches this\n")


def process_state() -> dict:
    root = logging.getLogger()
    return {
        "cwd": os.getcwd(),
        "argv": (id(sys.argv), list(sys.argv)),  # the same list, as other code may hold it
        "path": (id(sys.path), list(sys.path)),
        "environ": dict(os.environ),
        "root logger": (list(root.handlers), root.level),
        "streams": (sys.stdin, sys.stdout, sys.stderr),
    }


def test_a_run_leaves_this_process_as_it_was(tmp_path):
    (tmp_path / "probe.py").write_text(SCRIPT)
    before = process_state()
    run_python("probe.py", cwd=tmp_path)
    run_python("-m", "qkvmt", "translate", "--cfg", "job", cwd=tmp_path)  # Hydra sets up its logging
    assert process_state() == before
    assert logging.getLogger("qkvmt.probe").handlers == [] and not GlobalHydra.instance().is_initialized()


@pytest.mark.parametrize("argument, status, err", [("None", 0, ""), ("3", 3, ""), ("'stopped'", 1, "stopped\n")])
def test_sys_exit_gives_the_processs_status(argument, status, err, tmp_path):
    (tmp_path / "exits.py").write_text(f"import sys\nsys.exit({argument})\n")
    here, there = run_python("exits.py", cwd=tmp_path), start_python("exits.py", cwd=tmp_path)
    assert (
        (here.returncode, here.stdout, here.stderr)
        == (there.returncode, there.stdout, there.stderr)
        == (status, "", err)
    )
