"""explore(cfg): the attention explorer, a local web page over a checkpoint (by default the
bundled de->en model, with the bundled en->de model's links for symmetrized ones) until
Ctrl-C; qkvmt.explore does the work."""

import sys

from omegaconf import DictConfig

from qkvmt.api import Model
from qkvmt.explore.app import create_app
from qkvmt.explore.session import Explorer
from qkvmt.pipeline.align_settings import reverse_checkpoint
from qkvmt.pipeline.inference_setup import checkpoint_paths, decode_overrides, load_for_inference
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, server


def explore(cfg: DictConfig) -> dict:
    sock = bind(str(cfg.host), cfg.port)  # before the slow load: a port in use fails at once
    partner = reverse_checkpoint(cfg, checkpoint_paths(cfg))
    decode = decode_overrides(cfg.decode)
    model = load_for_inference(cfg)
    reverse = Model.from_checkpoints([partner], model.fabric) if partner else None
    host, port = sock.getsockname()[:2]
    access = Access.of(str(cfg.host), port)
    app = create_app(Explorer(model, reverse, cfg.symmetrize, decode, cfg.symmetrize_threshold), access)
    url = access.url(str(cfg.host) or host)  # as given: a host name is what the Host check expects
    if access.warning(str(cfg.host)):
        print(access.warning(str(cfg.host)), file=sys.stderr)
    print(
        f"attention explorer of {model!r}{' with its reverse' if reverse else ''} at {url} (Ctrl-C stops it)",
        flush=True,
    )
    server(app).run(sockets=[sock])
    return {"url": url}
