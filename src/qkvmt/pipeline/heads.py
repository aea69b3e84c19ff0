"""heads(cfg): each attention head's effect on the translation, masked one at a time, the pruning
curve, and what each head looks at (Model.heads)."""

import logging
import time
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.alignment.links import read_gold
from qkvmt.files import write_json
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.inference_setup import (
    beside_checkpoint,
    check_output_dir,
    decode_overrides,
    load_for_inference,
    save_result,
)
from qkvmt.studies.checks import check_references, checked_heads

log = logging.getLogger(__name__)


def heads(cfg: DictConfig) -> dict:
    start = time.time()
    checked_heads(cfg.prune_points, cfg.profile_sentences)  # before the slow load and the slower masking
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    meta = model.meta
    gold = read_gold(Path(cfg.gold_dir), meta.src_lang, meta.tgt_lang, cfg.gold_first) if cfg.gold_dir else None
    src, refs, name = read_inputs(cfg, meta, model.paths[0])
    check_references(src, refs, name)  # before the decoding settings, as the model checks them
    settings = {"prune_points": cfg.prune_points, "profile_sentences": cfg.profile_sentences, "name": name}
    report = model.heads(src, refs, gold, **settings, **decode)
    report.wall_s = round(time.time() - start, 1)  # the whole command's, loading included
    final = save_result(cfg, model.paths, report, name, "heads")
    try:  # evaluate's report.html of this checkpoint shows it
        recorded = beside_checkpoint(cfg, model.paths, "heads")
        recorded.parent.mkdir(parents=True, exist_ok=True)  # a bundled model's results home may be new
        write_json(recorded, report.to_dict())
    except OSError as e:
        log.warning("could not record the heads beside the checkpoint (%s); they are in %s", e, final)
    print(report.summary())
    print(f"{len(report.heads)} heads in {report.wall_s:.0f} s; wrote {final}")
    return report.to_dict() | {"output_dir": str(final)}
