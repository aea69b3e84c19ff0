"""evaluate(cfg): translate a split or any parallel files with a checkpoint (or an average of
several) and score the result with sacreBLEU, signatures included (Model.evaluate); and
read_inputs, how every command reads a split or files of sources and references."""

import json
import time
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.data.pairs import pair_lists, split_files
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.pipeline.runs import beside_checkpoint, check_output_dir, load_for_inference, save_result
from qkvmt.run_folder import run_data, validation_curve
from qkvmt.studies.checks import report_signals, same_length
from qkvmt.text.metrics import bleu_metric
from qkvmt.text.significance import checked_tests
from qkvmt.text.sources import TextFiles, read_lines, read_parallel
from qkvmt.views.heads import HeadsReport


def read_inputs(cfg: DictConfig, meta: CheckpointMeta, ckpt: Path) -> tuple[list[str], list[str], str]:
    """Source lines, references and a short name for them (the file's, or the split read):
    src_file/ref_file, or a split. A split comes from the data source the checkpoint's run
    trained on (a Hugging Face dataset, say), or from {split}.{lang}[.gz] in the folder of plain
    files its run read (run.json), or the files its run was given by path (data.val, data.test),
    or, for a model without its run or whose folder is gone, in
    data.root. `split` may name the run's val/test (the
    run's names, or data.splits where the run names none) or the source's own split."""
    if cfg.src_file or cfg.ref_file:
        if not (cfg.src_file and cfg.ref_file):
            raise UserError("give both src_file=<path> and ref_file=<path> (plain or .gz)")
        src, ref = read_parallel(Path(cfg.src_file), Path(cfg.ref_file))
        return src, ref, Path(cfg.src_file).name.removesuffix(".gz")
    data = run_data(ckpt)
    if data is not None and cfg.split in ("val", "test") and data.get(cfg.split):  # the run read it by path
        return *pair_lists(split_files(data[cfg.split], f"the run's data.{cfg.split}")), cfg.split
    names = (data or {}).get("splits") or cfg.data.get("splits") or {}
    split = names.get(cfg.split, cfg.split)
    if data is not None and data.get("source", {}).get("_target_") != "qkvmt.text.sources.TextFiles":
        source = instantiate(OmegaConf.create(data["source"]))(data["root"])
        src, ref = source.read(split, meta.src_lang, meta.tgt_lang)
    else:
        # a run on plain files reads them where its run.json says, while that folder is there
        own = Path(data["root"]) if data is not None and data.get("root") else None
        root = own if own is not None and own.is_dir() else Path(cfg.data.root)
        src, ref = TextFiles(root).read(split, meta.src_lang, meta.tgt_lang)
    return src, ref, split


def baseline_of(cfg: DictConfig) -> tuple[str | None, Path | None]:
    """baseline.ckpt_path or baseline.hyps_file (at most one), checked before the model loads."""
    ckpt, hyps = cfg.baseline.ckpt_path, cfg.baseline.hyps_file
    if ckpt and hyps:
        raise UserError("give baseline.ckpt_path=<model> or baseline.hyps_file=<translations>, not both")
    if hyps and not Path(hyps).is_file():
        raise UserError(f"baseline.hyps_file={hyps}: no such file; give the baseline's translations, one per line")
    return ckpt or None, Path(hyps) if hyps else None


def evaluate(cfg: DictConfig) -> dict:
    start = time.time()
    check_output_dir(cfg)
    signals = report_signals(cfg.attention.signals)
    bleu_metric(cfg.metrics.bleu_tokenize)
    baseline_ckpt, baseline_hyps = baseline_of(cfg)
    significance = OmegaConf.to_container(cfg.significance)
    checked_tests(significance["tests"], significance["samples"])
    model = load_for_inference(cfg)
    paths = model.paths
    src, refs, name = read_inputs(cfg, model.meta, paths[0])
    ref_tok = read_lines(Path(cfg.ref_tok_file)) if cfg.ref_tok_file else None
    if ref_tok is not None:
        same_length(ref_tok, src, f"ref_tok_file {cfg.ref_tok_file}")
    heads_file = beside_checkpoint(cfg, paths, "heads")  # what qkvmt heads found for this checkpoint, if it ran
    heads = HeadsReport(**json.loads(heads_file.read_text())) if heads_file.is_file() else None
    report = {
        "samples": cfg.attention.num_samples,
        "signals": signals,
        "curve": validation_curve(paths[0]),
        "heads": heads,
    }
    run = {"name": name, "progress": True, "precision": str(cfg.fabric.precision)}
    baseline = read_lines(baseline_hyps) if baseline_hyps else baseline_ckpt
    if baseline_hyps:
        same_length(baseline, src, f"baseline.hyps_file {baseline_hyps}")
    compared = {"bleu_tokenize": cfg.metrics.bleu_tokenize, "baseline": baseline, "significance": significance}
    compared["baseline_name"] = str(baseline_hyps or "baseline")
    result = model.evaluate(src, refs, ref_tok, settings=instantiate(cfg.decode), **report, **run, **compared)
    result.metrics["wall_s"] = round(time.time() - start, 2)  # the whole command's, loading included
    final = save_result(cfg, paths, result, name, "evaluations")
    print(result.summary() + f"; wrote {final}")
    return result.metrics | {"output_dir": str(final)}
