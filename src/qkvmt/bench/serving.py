"""The benchmark's serving stage: `qkvmt serve`'s application (qkvmt.serve, its Batcher and
Starlette app, served by uvicorn in a thread of this process, over real sockets, the Batcher's
loop on the main thread as the command runs it) under `clients` concurrent clients, each sending
requests of `per_request` validation sentences until all are sent, against the same model's own
`translate` over the same sentences in one call: sentences/s of each (median of `repeats` runs
after one warm-up), their ratio, and how many calls the server's loop made (requests waiting
together share one)."""

import http.client
import json
import queue
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from qkvmt.bench.timing import time_call
from qkvmt.decoding.search import DecodeConfig
from qkvmt.serve.app import create_app
from qkvmt.serve.batcher import Batcher
from qkvmt.serve.requests import Limits
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread


def serving_speed(cfg, model, sources: list[str]) -> dict:
    """The stage's figures for `model` (qkvmt.load's) on `sources`, with `cfg` the benchmark's `serve`."""
    settings = DecodeConfig(beam_size=cfg.beam_size)
    cpu = torch.device("cpu")
    direct_s, direct = time_call(lambda: model.translate(sources, settings), cpu, cfg.repeats)
    calls = []

    def counted(lines, wanted):
        calls.append(len(lines))
        return model.translate(lines, wanted)

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    limits = Limits(body_bytes=1 << 20, sentences=cfg.per_request, characters=10_000, beam_size=cfg.beam_size)
    batcher = Batcher(counted)
    app = create_app(batcher, Access.of("127.0.0.1", port), limits, settings, {"model": cfg.ckpt_path})
    with in_thread(app, sock):
        served_s, served = time_call(lambda: served_here(batcher, port, sources, cfg), cpu, cfg.repeats)
    runs = cfg.repeats + 1  # time_call's warm-up included
    return {
        "model": cfg.ckpt_path,
        "sentences": len(sources),
        "clients": cfg.clients,
        "per_request": cfg.per_request,
        "beam_size": cfg.beam_size,
        "direct_sent_s": len(sources) / direct_s,
        "served_sent_s": len(sources) / served_s,
        "served_vs_direct": direct_s / served_s,
        "calls_per_run": len(calls) / runs,
        "requests_per_run": -(-len(sources) // cfg.per_request),
        "identical": sum(a == b for a, b in zip(direct, served)),
    }


def served_here(batcher: Batcher, port: int, sources: list[str], cfg) -> list[str]:
    """`clients` on a thread while this one runs the batcher's loop, as `qkvmt serve` decodes on
    its main thread; the translations in order."""
    out: list[list[str]] = []

    def send():
        try:
            out.append(clients(port, sources, cfg))
        finally:
            batcher.close()

    sender = threading.Thread(target=send, name="qkvmt-bench-clients")
    sender.start()
    batcher.run()
    sender.join()
    if not out:
        raise RuntimeError("the clients failed: see the error above")
    return out[0]


def clients(port: int, sources: list[str], cfg) -> list[str]:
    """`sources` translated by cfg.clients threads, each taking the next request of
    cfg.per_request sentences until none is left; the translations in order."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for start in range(0, len(sources), cfg.per_request):
        todo.put(start)
    out: list[str | None] = [None] * len(sources)

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        try:
            while True:
                try:
                    start = todo.get_nowait()
                except queue.Empty:
                    return
                chunk = sources[start : start + cfg.per_request]
                body = json.dumps({"sentences": chunk})
                conn.request("POST", "/translate", body, {"Content-Type": "application/json"})
                answer = conn.getresponse()
                body = json.loads(answer.read())
                if answer.status != 200:
                    raise RuntimeError(f"the server answered {answer.status}: {body}")
                out[start : start + len(chunk)] = body["translations"]
        finally:
            conn.close()

    with ThreadPoolExecutor(cfg.clients) as pool:
        for done in [pool.submit(client) for _ in range(cfg.clients)]:
            done.result()
    return out
