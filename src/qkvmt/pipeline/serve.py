"""serve(cfg): a JSON translation server over a checkpoint (or an exported CTranslate2 folder,
engine=ctranslate2) until Ctrl-C; qkvmt.serve does the work, translating through the engine
`qkvmt translate` chooses (qkvmt.pipeline.translate.translator)."""

import sys

from omegaconf import DictConfig

from qkvmt.host.process_memory import keep_freed_host_memory
from qkvmt.pipeline.inference_setup import decode_overrides
from qkvmt.pipeline.translate import translator
from qkvmt.serve.app import create_app
from qkvmt.serve.batcher import batching_of
from qkvmt.serve.joining import batcher_for
from qkvmt.serve.requests import limits_of
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread


def serve(cfg: DictConfig) -> dict:
    # checked, with the port, before the slow load
    limits, batching = limits_of(cfg.limits, "limits."), batching_of(cfg.batching, "batching.")
    sock = bind(str(cfg.host), cfg.port)
    given = decode_overrides(cfg.decode)
    keep_freed_host_memory()  # call after call allocates the same large buffers: reuse them, not fresh pages
    engine = translator(cfg)
    settings = engine.decoding(**given)  # the server's own, which /health shows and a request changes
    batcher = batcher_for(engine, batching, settings)
    host, port = sock.getsockname()[:2]
    access = Access.of(str(cfg.host), port)
    served = cfg.model_dir if cfg.engine == "ctranslate2" else cfg.ckpt_path
    app = create_app(batcher, access, limits, settings, {"model": str(served), "engine": cfg.engine})
    url = access.url(str(cfg.host) or host, "/translate")  # as given: a host name is what the Host check expects
    if access.warning(str(cfg.host)):
        print(access.warning(str(cfg.host)), file=sys.stderr)
    print(f"translation server of {served} ({cfg.engine}): POST JSON to {url} (Ctrl-C stops it)", flush=True)
    # HTTP on a thread of its own, decoding on this one (batcher says why)
    with in_thread(app, sock, limits.head_seconds) as running:
        try:
            batcher.run()
        except KeyboardInterrupt:
            running.should_exit = True  # no new connection; the requests that came are answered, a later one cut off
            batcher.answer_waiting()
            raise
    return {"url": url}
