"""scripts/explore.py's function: it binds 127.0.0.1 unless told otherwise (then it warns, and its
address carries a token that every request needs), prints the address, and refuses a bad port
before loading anything."""

import importlib
import re
import socket

import pytest

from qkvmt.errors import UserError
from qkvmt.pipeline.explore import explore
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
    from starlette.testclient import TestClient

    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = explore(compose_inference("explore", f"ckpt_path={ckpt}"))
    out, err = capsys.readouterr()
    (run,) = served
    ((host, port),) = run.bound
    assert host == "127.0.0.1" and port > 0  # port=0 chose a free one
    assert result["url"] == f"http://127.0.0.1:{port}/" and result["url"] in out and "warning" not in err
    client = TestClient(run.app, base_url=result["url"])  # the printed address is answered, no token needed
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"host": f"evil.example:{port}"}).status_code == 403


def test_another_host_warns_and_needs_the_printed_token(trained_run, served, capsys):
    from starlette.testclient import TestClient

    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = explore(compose_inference("explore", f"ckpt_path={ckpt}", "host=0.0.0.0"))
    err = capsys.readouterr().err
    assert re.fullmatch(rf"http://{re.escape(socket.gethostname())}:\d+/\?token=[\w-]{{40,}}", result["url"])
    assert "warning: host=0.0.0.0 serves anyone" in err and "has the token" in err and "without it are refused" in err
    client = TestClient(served[0].app, base_url=result["url"].split("?")[0], follow_redirects=False)
    assert client.get("/").status_code == 403
    assert client.get(result["url"]).status_code == 303  # the token becomes a cookie
    assert client.get("/").status_code == 200


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
