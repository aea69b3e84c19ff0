"""`qkvmt serve` as a user starts it, in a process of its own: the address it prints, a connection
stalled mid-head closed after its limits.head_seconds, concurrent clients each answered with their
own translations (its main thread decodes, the HTTP server has a thread of its own), and Ctrl-C,
which answers the requests already waiting, then ends in one line."""

import http.client
import json
import re
import signal
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.commandline import ROOT, server_process, user_environment
from tests.serve.conftest import post, request_of

CLIENTS = 8
HEAD_SECONDS = 1  # well under the default, which the stalled connection below must not wait for


@pytest.mark.parametrize("continuous", ["auto", "true"])  # on a CPU: call after call, and requests joining searches
def test_the_command_serves_concurrent_clients_and_stops_on_ctrl_c(tmp_path, model, settings, continuous):
    argv = [sys.executable, "-m", "qkvmt", "serve", "ckpt_path=multi30k-de-en", "port=0", "decode.beam_size=5"]
    argv += [f"limits.head_seconds={HEAD_SECONDS}", f"batching.continuous={continuous}"]
    env = user_environment() | {"PYTHONPATH": str(ROOT / "src")}
    with server_process(argv, tmp_path, env) as (proc, line, stderr):
        match = re.search(r"POST JSON to http://127\.0\.0\.1:(\d+)/translate \(Ctrl-C stops it\)", line)
        assert match, f"{line!r}; stderr: {stderr()}"
        port = int(match.group(1))
        # a connection stalled mid-head is closed after the command's limits.head_seconds, not the default
        stalled = socket.create_connection(("127.0.0.1", port), timeout=HEAD_SECONDS + 5)
        stalled.sendall(b"POST /translate HTTP/1.1\r\n")
        assert stalled.recv(1) == b""
        stalled.close()
        with ThreadPoolExecutor(CLIENTS) as pool:
            answers = list(pool.map(lambda i: post(port, {"sentences": request_of(i)}), range(CLIENTS)))
            for i, (status, text) in enumerate(answers):
                assert status == 200, text
                assert json.loads(text)["translations"] == list(model.translate(request_of(i), settings)), i
            waiting = [pool.submit(post_or_cut_off, port, {"sentences": request_of(i)}) for i in range(CLIENTS)]
            threading.Event().wait(0.2)  # they reach the server, the first being translated
            proc.send_signal(signal.SIGINT)  # Ctrl-C, as a user stops it
            late = [f.result() for f in waiting]
        proc.wait(60)
    # a request that had reached the server is answered; one cut off by the stop is refused, never wrong
    for i, (status, text) in enumerate(late):
        assert status != 200 or json.loads(text)["translations"] == list(model.translate(request_of(i), settings))
    assert any(status == 200 for status, _ in late)
    assert proc.returncode == 130 and stderr().strip().endswith("error: interrupted (Ctrl-C)"), stderr()
    assert list(tmp_path.iterdir()) == []


def post_or_cut_off(port: int, body) -> tuple[int, str]:
    """post's answer, or (0, why) for a request whose connection the stopping server closed."""
    try:
        return post(port, body)
    except (ConnectionError, http.client.HTTPException) as e:
        return 0, repr(e)
