"""faithfulness(cfg): every signal's cross-attention readings scored on a split by deleting, and
keeping only, the source tokens each ranks highest for a target token (Model.faithfulness); a
table, a plot, and the AER of an align leaderboard beside them."""

import time

from omegaconf import DictConfig, OmegaConf

from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.inference_setup import check_output_dir, load_for_inference, save_result
from qkvmt.setting_types import path_text
from qkvmt.studies.checks import checked_faithfulness, checked_target, read_leaderboard


def faithfulness(cfg: DictConfig) -> dict:
    start = time.time()
    signals = OmegaConf.to_object(cfg.signals) if OmegaConf.is_list(cfg.signals) else cfg.signals
    levels = OmegaConf.to_object(cfg.levels) if OmegaConf.is_list(cfg.levels) else cfg.levels
    draws = {"targets_per_sentence": cfg.targets_per_sentence, "random_draws": cfg.random_draws}
    names, _ = checked_faithfulness(signals, levels, {"n": cfg.n} | draws, cfg.seed)  # all before the slow load
    signals = None if signals is None else names
    aer_file = path_text(cfg.aer_file)
    read_leaderboard(aer_file)
    checked_target(cfg.target)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    src, refs, name = read_inputs(cfg, model.meta, model.paths[0])
    settings = {"n": cfg.n, "signals": signals, "levels": levels, "seed": cfg.seed, "aer_file": aer_file}
    settings |= {"target": cfg.target}
    report = model.faithfulness(src, refs, name=name, **settings, **draws)
    report.result["wall_s"] = round(time.time() - start, 1)  # the whole command's, loading included
    final = save_result(cfg, model.paths, report, name, "faithfulness")
    print(report.summary() + f"; wrote {final}")
    return report.result | {"output_dir": str(final)}
