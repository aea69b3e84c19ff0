"""A checkpoint scored on a test set (`Model.evaluate`, `qkvmt evaluate`): the sources translated
and scored with sacreBLEU, signatures included, and the first sentences' attention, links and
scores for the report (qkvmt.results.evaluation)."""

import time
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from qkvmt.analysis.forced import forced_attention
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.files import sha256
from qkvmt.host.placement import precision_of
from qkvmt.results.evaluation import Evaluation, Samples
from qkvmt.results.heads import HeadsReport
from qkvmt.results.report import ReportSample
from qkvmt.studies.checks import same_length
from qkvmt.studies.model_protocol import ModelLike
from qkvmt.text.metrics import DEFAULT_TOKENIZE, score, score_tokenized_lowercased, sentence_scores
from qkvmt.text.significance import paired_tests


@dataclass(frozen=True)
class Comparison:
    """A second system to compare with: its translations of the same sources (`baseline`), what to
    call it, and the settings of sacreBLEU's paired tests (qkvmt.text.significance)."""

    baseline: list[str]
    name: str = "baseline"
    tests: tuple[str, ...] = ("bs", "ar")
    samples: dict = field(default_factory=dict)  # test -> resamples or trials; sacreBLEU's defaults otherwise
    seed: int = 12345

    def against(self, hyps: list[str], references: list[str], bleu_tokenize: str) -> dict:
        tested = paired_tests(hyps, self.baseline, references, self.tests, self.samples, self.seed, bleu_tokenize)
        return {"baseline": self.name, "seed": self.seed} | tested


def report_samples(
    model: ModelLike, src: list[str], refs: list[str], hyps, per_sentence: tuple[list, dict], n: int, signals: set[str]
) -> Samples:
    """The first n sentences with a source and a translation, each forced over its generated ids
    exactly: every layer's and head's attention, the maps of `signals`, its own BLEU and chrF (of
    `per_sentence`: every sentence's scores and their signatures), and the word links of the
    checkpoint's default alignment policy (as align reads them)."""
    picked = [i for i in range(len(src)) if src[i].strip() and hyps[i].strip()][:n]
    policy, full_context = model.default_policy, model.meta.full_context_layer
    every, signatures = per_sentence
    samples, arrays = [], {}
    for i in picked:
        scores = every[i]
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
    compare: Comparison | None = None,
) -> Evaluation:
    """`sources` translated by `settings` and scored against `references` (and, lowercased and
    tokenized, against `tokenized_references`), every sentence's own BLEU and chrF beside; `report`:
    how many sentences report.html shows and by which signals; `run`: precision (how metrics name it),
    progress (a bar while translating) and bleu_tokenize (sacreBLEU's tokenizer for BLEU); `compare`:
    a baseline's translations of the same sources, and sacreBLEU's paired tests against them."""
    start = time.time()
    run = {"precision": None, "progress": False, "bleu_tokenize": DEFAULT_TOKENIZE} | (run or {})
    if not sources:  # checked before translating: sacreBLEU cannot score zero sentences
        raise UserError(f"{name}: no sentences to evaluate; give at least one source with its reference")
    same_length(references, sources, "references")
    if tokenized_references is not None:
        same_length(tokenized_references, sources, "tokenized_references")
    if compare is not None:
        same_length(compare.baseline, sources, f"the baseline's translations ({compare.name})")
    begin = time.time()
    hyps = model.translate(sources, settings, progress=run["progress"])
    decode_s = time.time() - begin
    tokenize = run["bleu_tokenize"]
    metrics = score(hyps, references, tokenize)
    per_sentence = sentence_scores(hyps, references, tokenize)
    metrics["signatures"] |= per_sentence[1]  # sentences.jsonl's scores
    if compare is not None:
        metrics["significance"] = compare.against(hyps, references, tokenize)
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
        precision=run["precision"] or precision_of(model.fabric),
        decode_s=round(decode_s, 2),
        sent_per_s=round(len(sources) / decode_s, 2),
        wall_s=round(time.time() - start, 2),
    )
    policy = model.default_policy.to_dict() | {"full_context": model.meta.full_context_layer is not None}
    sampled = partial(report_samples, model, sources, references, hyps, per_sentence, *report)  # forced when asked
    baseline = None if compare is None else sentence_scores(compare.baseline, references, tokenize)[0]
    return Evaluation(hyps, metrics, sampled, policy, list(curve), heads, per_sentence[0], baseline)
