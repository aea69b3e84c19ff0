"""explore(cfg): the attention explorer, a local web page over a checkpoint (by default the
bundled de->en model, with the bundled en->de model's links for symmetrized ones) until
Ctrl-C; qkvmt.explore does the work."""

import sys

from omegaconf import DictConfig

from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.explore.app import bind, create_app, server
from qkvmt.explore.guard import Access
from qkvmt.explore.session import Explorer
from qkvmt.pipeline.align_settings import reverse_checkpoint
from qkvmt.pipeline.runs import checkpoint_paths, decode_overrides, load_for_inference


def explore(cfg: DictConfig) -> dict:
    port = cfg.port
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UserError(f"port={port!r}: give a port number 1..65535, or 0 for any free port")
    sock = bind(str(cfg.host), port)  # before the slow load: a port in use fails at once
    partner = reverse_checkpoint(cfg, checkpoint_paths(cfg))
    model = load_for_inference(cfg)
    reverse = Model.from_checkpoints([partner], model.fabric) if partner else None
    host, port = sock.getsockname()[:2]
    access = Access.of(str(cfg.host), port)
    app = create_app(
        Explorer(model, reverse, cfg.symmetrize, decode_overrides(cfg.decode), cfg.symmetrize_threshold), access
    )
    url = access.url(str(cfg.host) or host)  # as given: a host name is what the Host check expects
    if access.token is not None:
        print(
            f"warning: host={cfg.host} serves anyone who can reach this machine on port {port} and has the token in "
            "the address below (sent unencrypted, over plain HTTP); requests without it are refused. Leave host= out "
            "to serve this computer alone (127.0.0.1)",
            file=sys.stderr,
        )
    print(
        f"attention explorer of {model!r}{' with its reverse' if reverse else ''} at {url} (Ctrl-C stops it)",
        flush=True,
    )
    server(app).run(sockets=[sock])
    return {"url": url}
