"""evaluate(cfg): translate a split or any parallel files with a checkpoint (or an average of
several) and score the result with sacreBLEU, signatures included (Model.evaluate); and
read_inputs, how every command reads a split or files of sources and references."""

import json
import time
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.api import Model
from qkvmt.bundled import bundled_names, names_nothing, resolve
from qkvmt.data.pairs import pair_lists, split_files
from qkvmt.errors import UserError
from qkvmt.files import check_writable
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.pipeline.inference_setup import (
    beside_checkpoint,
    check_output_dir,
    checkpoint_paths,
    decode_overrides,
    load_for_inference,
    results_home,
    save_result,
)
from qkvmt.results.heads import HeadsReport
from qkvmt.setting_types import path_text, whole_number
from qkvmt.studies.checks import report_signals, same_length
from qkvmt.text.metrics import bleu_metric
from qkvmt.text.significance import changed_setting, checked_settings
from qkvmt.text.sources import TextFiles, read_lines, read_parallel
from qkvmt.training_run import run_data, validation_curve


def read_inputs(cfg: DictConfig, meta: CheckpointMeta, ckpt: Path) -> tuple[list[str], list[str], str]:
    """Source lines, references and a short name for them (the file's, or the split read):
    src_file/ref_file, or a split. A split comes from the data source the checkpoint's run
    trained on (a Hugging Face dataset, say), or from {split}.{lang}[.gz] in the folder of plain
    files its run read (run.json), or the files its run was given by path (data.val, data.test),
    or, for a model without its run or whose folder is gone, in
    data.root. `split` may name the run's val/test (the
    run's names, or data.splits where the run names none) or the source's own split."""
    given = given_files(cfg)
    if given is not None:
        return given
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


def given_files(cfg: DictConfig) -> tuple[list[str], list[str], str] | None:
    """src_file and ref_file as read_inputs returns them, or None when neither is given: they need
    no model, so evaluate reads them before it loads one."""
    if not (cfg.src_file or cfg.ref_file):
        return None
    if not (cfg.src_file and cfg.ref_file):
        raise UserError("give both src_file=<path> and ref_file=<path> (plain or .gz)")
    src_file, ref_file = Path(str(cfg.src_file)), Path(str(cfg.ref_file))  # str: Hydra reads src_file=5 as a number
    src, ref = read_parallel(src_file, ref_file)
    return src, ref, src_file.name.removesuffix(".gz")


def some_pairs(cfg: DictConfig, src: list[str], name: str) -> None:
    """Zero sentence pairs cannot be scored (sacreBLEU has no score of nothing): refused, naming them."""
    if src:
        return
    if cfg.src_file:
        raise UserError(
            f"src_file={cfg.src_file} and ref_file={cfg.ref_file} hold no lines: give files with one sentence a line"
        )
    raise UserError(f"split={name} holds no sentences: give a split (or src_file= and ref_file=) with some")


def check_outputs(cfg: DictConfig) -> None:
    """The output folder, explicit or default, refused before any slow work if it cannot be written."""
    check_output_dir(cfg)
    if not cfg.output_dir:
        home = results_home(cfg, checkpoint_paths(cfg)) / "evaluations"
        check_writable(home / "new", f"the default output folder {home}", "set output_dir=<a folder you can write to>")


def baseline_of(cfg: DictConfig) -> tuple[str | None, Path | None]:
    """baseline.ckpt_path or baseline.hyps_file (at most one), checked before the model loads."""
    ckpt, hyps = path_text(cfg.baseline.ckpt_path), path_text(cfg.baseline.hyps_file)
    if ckpt and hyps:
        raise UserError("give baseline.ckpt_path=<model> or baseline.hyps_file=<translations>, not both")
    if hyps and Path(hyps).is_dir():
        raise UserError(f"baseline.hyps_file={hyps} is a folder: give the file of the baseline's translations in it")
    if hyps and not Path(hyps).is_file():
        raise UserError(f"baseline.hyps_file={hyps}: no such file; give the baseline's translations, one per line")
    if ckpt and names_nothing(ckpt):
        raise UserError(
            f"baseline.ckpt_path={ckpt}: no such file or folder; give the baseline's checkpoint (.ckpt), "
            f"model folder or bundled model's name ({', '.join(bundled_names()) or 'none installed'})"
        )
    return ckpt or None, Path(hyps) if hyps else None


def check_significance(cfg: DictConfig, compared: bool) -> dict:
    """significance.*, every key and value checked whatever tests are named; without a baseline
    (`compared` false) nothing is tested, so a setting changed from its default is refused."""
    significance = checked_settings(OmegaConf.to_container(cfg.significance))
    changed = changed_setting(significance)
    if changed and not compared:
        raise UserError(
            f"significance.{changed} takes effect only in a comparison: "
            "give baseline.ckpt_path=<model> or baseline.hyps_file=<translations>, or leave significance.* out"
        )
    return significance


def baseline_model(ckpt: str, model: Model) -> Model:
    """The baseline's model, placed as `model` is, loaded before any translating; an error names the setting."""
    try:
        return Model.from_checkpoints([resolve(ckpt)], model.fabric)
    except UserError as e:
        raise UserError(f"baseline.ckpt_path={ckpt}: {e}") from None


def evaluate(cfg: DictConfig) -> dict:
    start = time.time()
    signals = report_signals(cfg.attention.signals)
    whole_number("attention.num_samples", cfg.attention.num_samples, least=0)  # -1 would slice off the last
    bleu_metric(cfg.metrics.bleu_tokenize)
    decode = decode_overrides(cfg.decode)
    baseline_ckpt, baseline_hyps = baseline_of(cfg)
    significance = check_significance(cfg, compared=bool(baseline_ckpt or baseline_hyps))
    check_outputs(cfg)  # after the settings: the default folder's place needs the checkpoint found (or fetched)
    # files need no model: read (and a pair of empty ones refused) before it loads
    given = given_files(cfg)
    if given is not None:
        some_pairs(cfg, given[0], given[2])
    ref_tok = read_lines(Path(str(cfg.ref_tok_file))) if cfg.ref_tok_file else None
    baseline = read_lines(baseline_hyps) if baseline_hyps else None
    model = load_for_inference(cfg)
    if baseline_ckpt:
        baseline = baseline_model(baseline_ckpt, model)
    paths = model.paths
    src, refs, name = given or read_inputs(cfg, model.meta, paths[0])
    some_pairs(cfg, src, name)  # a split's, found only now: its files depend on the model's languages
    if ref_tok is not None:
        same_length(ref_tok, src, f"ref_tok_file {cfg.ref_tok_file}")
    if baseline_hyps:
        same_length(baseline, src, f"baseline.hyps_file {baseline_hyps}")
    heads_file = beside_checkpoint(cfg, paths, "heads")  # what qkvmt heads found for this checkpoint, if it ran
    heads = HeadsReport(**json.loads(heads_file.read_text())) if heads_file.is_file() else None
    report = {
        "samples": cfg.attention.num_samples,
        "signals": signals,
        "curve": validation_curve(paths[0]),
        "heads": heads,
    }
    run = {"name": name, "progress": True, "precision": str(cfg.fabric.precision)}
    compared = {"bleu_tokenize": cfg.metrics.bleu_tokenize, "baseline": baseline, "significance": significance}
    compared["baseline_name"] = str(baseline_hyps or "baseline")
    result = model.evaluate(src, refs, ref_tok, **decode, **report, **run, **compared)
    result.metrics["wall_s"] = round(time.time() - start, 2)  # the whole command's, loading included
    final = save_result(cfg, paths, result, name, "evaluations")
    print(result.summary() + f"; wrote {final}")
    return result.metrics | {"output_dir": str(final)}
