"""scripts/explore.py's function: it binds 127.0.0.1 unless told otherwise (then it warns), prints
the address, and refuses a bad port before loading anything."""

import importlib
import socket

import pytest

from qkvmt.errors import UserError
from qkvmt.pipeline import explore
from tests.conftest import compose_inference


class Served:
    """Stands in for uvicorn: records what it would serve on, and returns at once."""

    def __init__(self, app):
        self.app, self.bound = app, None

    def run(self, sockets):
        self.bound = [s.getsockname()[:2] for s in sockets]
        for s in sockets:
            s.close()


@pytest.fixture
def served(monkeypatch):
    runs = []
    module = importlib.import_module("qkvmt.pipeline.explore")  # the package's `explore` is the function
    monkeypatch.setattr(module, "server", lambda app: runs.append(Served(app)) or runs[-1])
    return runs


def test_it_serves_this_computer_alone_by_default_on_a_free_port(trained_run, served, capsys):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = explore(compose_inference("explore", f"ckpt_path={ckpt}"))
    out, err = capsys.readouterr()
    (run,) = served
    ((host, port),) = run.bound
    assert host == "127.0.0.1" and port > 0  # port=0 chose a free one
    assert result["url"] == f"http://127.0.0.1:{port}/" and result["url"] in out and "warning" not in err
    assert run.app.routes  # the Starlette application of the checkpoint's explorer


def test_another_host_warns_that_the_model_is_exposed(trained_run, served, capsys):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = explore(compose_inference("explore", f"ckpt_path={ckpt}", "host=0.0.0.0"))
    err = capsys.readouterr().err
    assert result["url"].startswith("http://0.0.0.0:") and "warning: host=0.0.0.0 exposes the model" in err


def test_a_bad_or_busy_port_is_refused_before_loading(served, tmp_path):
    missing = tmp_path / "none.ckpt"  # never read: the port is checked first
    for port in ("-1", "70000", "abc"):
        with pytest.raises(UserError, match=rf"port='?{port}'?: give a port number"):
            explore(compose_inference("explore", f"ckpt_path={missing}", f"port={port}"))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        with pytest.raises(UserError, match=r"cannot listen on 127.0.0.1:\d+ .*choose another port="):
            explore(compose_inference("explore", f"ckpt_path={missing}", f"port={busy.getsockname()[1]}"))
    finally:
        busy.close()
    assert served == []
