"""The benchmark's serving stage: `qkvmt serve`'s application (qkvmt.serve, its Batcher and
Starlette app, served by uvicorn in a thread of this process, over real sockets, the Batcher's
loop on the main thread as the command runs it) under `clients` concurrent clients in another
process (qkvmt.bench.http_clients), each sending requests of `per_request` validation sentences
until all are sent, against the same model's own `translate` over the same sentences in one
call, and in calls of as many sentences as the clients keep in flight (the fullest calls any
batching can make of them), the three taking turns: sentences/s of each (median of `repeats`
runs after one warm-up), the ratios, and how many calls the server's loop made (requests waiting
together share one)."""

import contextlib
import json
import subprocess
import sys
import threading

import torch

from qkvmt.bench.timing import time_in_turns
from qkvmt.decoding.search import DecodeConfig
from qkvmt.serve.app import create_app
from qkvmt.serve.batcher import Batcher, batching_of
from qkvmt.serve.joining import Joining, batcher_for
from qkvmt.serve.requests import Limits
from qkvmt.web.guard import Access
from qkvmt.web.json_api import HEAD_SECONDS, bind, in_thread


def serving_speed(cfg, model, sources: list[str]) -> dict:
    """The stage's figures for `model` (qkvmt.load's) on `sources`, with `cfg` the benchmark's `serve`."""
    settings = DecodeConfig(beam_size=cfg.beam_size)
    calls, out = [], {}
    in_flight = cfg.clients * cfg.per_request  # the most sentences the clients wait on at once: the fullest call

    class Counted:  # the model, each call or search of the server's loop counted
        device = model.device

        def translate(self, lines, wanted):
            calls.append(len(lines))
            return model.translate(lines, wanted)

        def running(self, wanted):
            calls.append(0)
            return model.running(wanted)

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    limits = Limits(
        body_bytes=1 << 20,
        sentences=cfg.per_request,
        characters=10_000,
        beam_size=cfg.beam_size,
        head_seconds=HEAD_SECONDS,
    )
    batcher = batcher_for(Counted(), batching_of(cfg.batching, "serve.batching."), settings)
    app = create_app(batcher, Access.of("127.0.0.1", port), limits, settings, {"model": cfg.ckpt_path})
    job = {"port": port, "sources": sources, "clients": cfg.clients, "per_request": cfg.per_request}
    with in_thread(app, sock), client_process(job) as process:
        seconds = time_in_turns(
            {
                "direct": lambda: out.update(direct=model.translate(sources, settings)),
                "in_flight": lambda: [
                    model.translate(sources[i : i + in_flight], settings) for i in range(0, len(sources), in_flight)
                ],
                "served": lambda: out.update(served=served_here(batcher, process)),
            },
            torch.device("cpu"),
            cfg.repeats,
        )
    direct_s, served_s, direct, served = seconds["direct"], seconds["served"], out["direct"], out["served"]
    runs = cfg.repeats + 1  # time_in_turns's warm-up included
    return {
        "model": cfg.ckpt_path,
        "sentences": len(sources),
        "clients": cfg.clients,
        "per_request": cfg.per_request,
        "beam_size": cfg.beam_size,
        "batching": dict(cfg.batching),
        "direct_sent_s": len(sources) / direct_s,
        "served_sent_s": len(sources) / served_s,
        "served_vs_direct": direct_s / served_s,
        "in_flight": in_flight,
        "in_flight_sent_s": len(sources) / seconds["in_flight"],
        "served_vs_in_flight": seconds["in_flight"] / served_s,
        "continuous": isinstance(batcher, Joining),
        "calls_per_run": len(calls) / runs,  # with continuous batching, searches started
        "requests_per_run": -(-len(sources) // cfg.per_request),
        "identical": sum(a == b for a, b in zip(direct, served)),
    }


@contextlib.contextmanager
def client_process(job: dict):
    """The clients' process (qkvmt.bench.http_clients), started and given `job` before any timing.
    In a session of its own, Ctrl-C reaches only the benchmark, which then ends it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "qkvmt.bench.http_clients"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        process.stdin.write(json.dumps(job) + "\n")
        process.stdin.flush()
        yield process
    except BaseException:  # a failed or interrupted run: its clients may wait on answers that never come
        process.kill()
        raise
    finally:
        with contextlib.suppress(OSError):  # a process that has ended has closed its end
            process.stdin.close()
        process.wait()  # its input ended: it ends


def served_here(batcher: Batcher, process: subprocess.Popen) -> list[str]:
    """One run of the clients while this thread runs the batcher's loop, as `qkvmt serve` decodes
    on its main thread; the translations in order."""
    out: list[dict] = []

    def send():
        try:
            process.stdin.write("go\n")
            process.stdin.flush()
            line = process.stdout.readline()
            out.append(json.loads(line) if line else {"error": "the clients' process ended"})
        finally:
            batcher.close()

    sender = threading.Thread(target=send, name="qkvmt-bench-clients", daemon=True)  # Ctrl-C need not wait for it
    sender.start()
    batcher.run()
    sender.join()
    if not out or "error" in out[0]:
        raise RuntimeError(f"the clients failed: {out[0]['error'] if out else 'see the error above'}")
    return out[0]["translations"]
