"""A checkpoint scored on a test set (`Model.evaluate`, `qkvmt evaluate`): the sources translated
and scored with sacreBLEU, signatures included, and the first sentences' attention, links and
scores for the report (qkvmt.views.evaluation)."""

import time
from dataclasses import asdict
from functools import partial

import numpy as np

from qkvmt.analysis.forced import forced_attention
from qkvmt.decoding.search import DecodeConfig
from qkvmt.files import sha256
from qkvmt.studies.checks import same_length
from qkvmt.studies.model_like import ModelLike
from qkvmt.text.metrics import score, score_tokenized_lowercased, sentence_scores
from qkvmt.views.evaluation import Evaluation, Samples
from qkvmt.views.heads import HeadsReport
from qkvmt.views.report import ReportSample


def report_samples(model: ModelLike, src: list[str], refs: list[str], hyps, n: int, signals: set[str]) -> Samples:
    """The first n sentences with a source and a translation, each forced over its generated ids
    exactly: every layer's and head's attention, the maps of `signals`, its own BLEU and chrF, and
    the word links of the checkpoint's default alignment policy (as align reads them)."""
    picked = [i for i in range(len(src)) if src[i].strip() and hyps[i].strip()][:n]
    policy, full_context = model.default_policy, model.meta.full_context_layer
    own, signatures = sentence_scores([hyps[i] for i in picked], [refs[i] for i in picked])
    samples, arrays = [], {}
    for i, scores in zip(picked, own):
        # a head supervised with full context is read from its layer without the causal mask, as align reads it
        sa = forced_attention(model.transformer, model.tokenizer, src[i], hyps.ids[i], full_context, analyses=signals)
        for m in sa.maps():
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
    return Samples(picked, samples, arrays, signatures)


def evaluate(
    model: ModelLike,
    sources: list[str],
    references: list[str],
    settings: DecodeConfig,
    name: str = "sentences",
    tokenized_references: list[str] | None = None,
    report: tuple[int, set[str]] = (0, {"weights"}),
    curve: list[dict] = (),
    heads: HeadsReport | None = None,
    run: dict | None = None,
) -> Evaluation:
    """`sources` translated by `settings` and scored against `references` (and, lowercased and
    tokenized, against `tokenized_references`); `report`: how many sentences report.html shows and
    by which signals; `run`: precision (how metrics name it) and progress (a bar while translating)."""
    start, run = time.time(), {"precision": None, "progress": False} | (run or {})
    if tokenized_references is not None:
        same_length(tokenized_references, sources, "tokenized_references")
    begin = time.time()
    hyps = model.translate(sources, settings, progress=run["progress"])
    decode_s = time.time() - begin
    metrics = score(hyps, references)
    if tokenized_references is not None:
        tok = score_tokenized_lowercased(hyps, tokenized_references, model.meta.tgt_lang)
        metrics["bleu_tok_lc"] = tok["bleu"]
        metrics["signatures"]["bleu_tok_lc"] = tok["signature"]
    metrics.update(
        n=len(sources),
        source=name,
        src_lang=model.meta.src_lang,
        tgt_lang=model.meta.tgt_lang,
        decode=asdict(settings),
        checkpoints=[{"path": str(p), "sha256": sha256(p)} for p in model.paths],
        device=str(model.fabric.device),
        precision=run["precision"] or model.fabric.strategy.precision.precision,
        decode_s=round(decode_s, 2),
        sent_per_s=round(len(sources) / decode_s, 2),
        wall_s=round(time.time() - start, 2),
    )
    policy = model.default_policy.to_dict() | {"full_context": model.meta.full_context_layer is not None}
    sampled = partial(report_samples, model, sources, references, hyps, *report)  # the forced passes, when asked for
    return Evaluation(hyps, metrics, sampled, policy, list(curve), heads)
