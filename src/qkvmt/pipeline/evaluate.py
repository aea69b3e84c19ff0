"""evaluate(cfg): translate a split or any parallel files with a checkpoint (or an average of
several) and score the result with sacreBLEU, signatures included."""

import json
import logging
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.signals import SIGNALS
from qkvmt.api import Model
from qkvmt.errors import UserError
from qkvmt.files import atomic_write, sha256, write_json, write_text
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.pipeline.runs import (
    StagedOutput,
    beside_checkpoint,
    check_output_dir,
    load_for_inference,
    run_data,
    validation_curve,
)
from qkvmt.text.metrics import score, score_tokenized_lowercased, sentence_scores
from qkvmt.text.sources import TextFiles, read_lines, read_parallel
from qkvmt.views.figures import curve_plot, heatmap_grid
from qkvmt.views.heads import HeadsReport
from qkvmt.views.report import ReportSample, attention_report

log = logging.getLogger(__name__)


def read_inputs(cfg: DictConfig, meta: CheckpointMeta, ckpt: Path) -> tuple[list[str], list[str], str]:
    """Source lines, references and a short name for them (the file's, or the split read):
    src_file/ref_file, or a split. A split comes from the data source the checkpoint's run
    trained on (a Hugging Face dataset, say), or from {split}.{lang}[.gz] in the folder of plain
    files its run read (run.json), or, for a model without its run or whose folder is gone, in
    data.root. `split` may name the run's val/test (the
    run's names, or data.splits where the run names none) or the source's own split."""
    if cfg.src_file or cfg.ref_file:
        if not (cfg.src_file and cfg.ref_file):
            raise UserError("give both src_file=<path> and ref_file=<path> (plain or .gz)")
        src, ref = read_parallel(Path(cfg.src_file), Path(cfg.ref_file))
        return src, ref, Path(cfg.src_file).name.removesuffix(".gz")
    data = run_data(ckpt)
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


def evaluate(cfg: DictConfig) -> dict:
    start = time.time()
    check_output_dir(cfg)
    signals = report_signals(cfg.attention.signals)
    model = load_for_inference(cfg)
    meta, paths = model.meta, model.paths
    src, refs, name = read_inputs(cfg, meta, paths[0])
    ref_tok = read_lines(Path(cfg.ref_tok_file)) if cfg.ref_tok_file else None
    if ref_tok is not None and len(ref_tok) != len(src):
        raise UserError(f"ref_tok_file {cfg.ref_tok_file} has {len(ref_tok)} lines, the source has {len(src)}")
    decode_cfg = instantiate(cfg.decode)
    t0 = time.time()
    hyps = model.translate(src, decode_cfg, progress=True)
    decode_s = time.time() - t0

    metrics = score(hyps, refs)
    if ref_tok is not None:
        tok = score_tokenized_lowercased(hyps, ref_tok, meta.tgt_lang)
        metrics["bleu_tok_lc"] = tok["bleu"]
        metrics["signatures"]["bleu_tok_lc"] = tok["signature"]
    metrics.update(
        n=len(src),
        source=name,
        src_lang=meta.src_lang,
        tgt_lang=meta.tgt_lang,
        decode=asdict(decode_cfg),
        checkpoints=[{"path": str(p), "sha256": sha256(p)} for p in paths],
        device=str(model.fabric.device),
        precision=str(cfg.fabric.precision),
        decode_s=round(decode_s, 2),
        sent_per_s=round(len(src) / decode_s, 2),
        wall_s=round(time.time() - start, 2),
    )
    staged = StagedOutput(cfg, paths, name, kind="evaluations")
    with staged as out:
        write_text(out / "hypotheses.txt", "".join(h + "\n" for h in hyps))
        write_json(out / "metrics.json", metrics)
        export_attention(
            out,
            model,
            src,
            refs,
            hyps,
            metrics,
            cfg.attention.num_samples,
            signals,
            validation_curve(paths[0]),
            beside_checkpoint(cfg, paths, "heads"),
        )
    out = staged.final
    for key in ("bleu", "chrf", "bleu_lc", "bleu_tok_lc"):
        if key in metrics:
            print(f"{key:12s} {metrics[key]:6.2f}  {metrics['signatures'][key]}")
    print(f"{len(src)} sentences, {metrics['sent_per_s']:.1f} sent/s; wrote {out}")
    metrics["output_dir"] = str(out)
    return metrics


def report_signals(names) -> set[str]:
    """The signals the report shows (attention.signals): null, every registered one; else the ones
    listed, each checked by name before anything runs."""
    if names is None:
        return set(SIGNALS)
    names = [names] if isinstance(names, str) else list(names)
    unknown = [n for n in names if n not in SIGNALS]
    if unknown:
        raise UserError(f"attention.signals: {unknown[0]} is no signal; list some of {', '.join(SIGNALS)}")
    return {"weights", *names}


def export_attention(
    out: Path,
    model: Model,
    src: list[str],
    refs: list[str],
    hyps,
    metrics: dict,
    num_samples: int,
    signals: set[str],
    curve: list[dict],
    heads_file: Path,
) -> None:
    """Every layer's and head's attention for the first `num_samples` sentences, next to the scores:
    attention/<i>_<kind>.png (layers × heads), attention.npz (raw weights) and report.html, where
    each sample also shows the maps of `signals` (report_signals), its own BLEU and chrF and the word
    links of the checkpoint's default alignment policy (align.py's), and the run's validation
    curve is drawn when it has one. `hyps`: the Translations of `src`, whose generated ids are
    forced exactly."""
    samples, arrays = [], {}
    picked = [i for i in range(len(src)) if src[i].strip() and hyps[i].strip()][:num_samples]
    if picked:
        (out / "attention").mkdir(exist_ok=True)
    policy = model.default_policy
    full_context = model.meta.full_context_layer
    own, signatures = sentence_scores([hyps[i] for i in picked], [refs[i] for i in picked])
    for i, scores in zip(picked, own):
        # a head supervised with full context is read from its layer without the causal mask, as align.py reads it
        sa = forced_attention(model.transformer, model.tokenizer, src[i], hyps.ids[i], full_context, analyses=signals)
        for m in sa.maps():
            heatmap_grid(
                m.weights,
                m.rows,
                m.cols,
                out / "attention" / f"{i:04d}_{m.kind}.png",
                title=f"sentence {i + 1}: {m.label} attention",
            )
            arrays[f"s{i}_{m.kind}"] = m.weights
        for side in ("src", "tgt", "out"):
            arrays[f"s{i}_{side}_tokens"] = np.array(getattr(sa, f"{side}_tokens"))
        samples.append(
            ReportSample(
                src[i],
                hyps[i],
                sa.maps(),
                reference=refs[i],
                scores=scores,
                alignment=policy.align_words(sa),
                signals={s: sa.maps(s) for s in sa.signals[1:]},
                token_scores=sa.token_scores,
                source_share=None if sa.contributions is None else sa.contributions.source_share,
            )
        )
    atomic_write(out / "attention.npz", lambda f: np.savez_compressed(f, **arrays))
    policy_shown = policy.to_dict() | {"full_context": full_context is not None}
    # what heads.py found for this checkpoint, if it ran
    heads = HeadsReport(**json.loads(heads_file.read_text())) if heads_file.is_file() else None
    attention_report(out / "report.html", metrics, samples, curve, signatures, policy_shown, heads)
    if curve:
        curve_plot(curve, out / "curve.png", title="validation during training")
