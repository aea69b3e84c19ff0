"""report.html: scores with their signatures next to the attention of translated sentences.

Each sample shows its texts, an attention viewer (kind, layer and head selectors, the head
average, token pair and weight on hover) and, when given, the word links of an alignment
policy over its word-level cross-attention. `samples_page` draws the samples alone: one
sentence's attention (`SentenceAttention.html()`) is the same section of the same page.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from qkvmt.alignment.policy import WordAlignment
from qkvmt.files import write_text
from qkvmt.results.html import check_labels, escape, page, plain, texts_html, viewer_maps

METRIC_NAMES = {
    "bleu": "BLEU",
    "chrf": "chrF",
    "bleu_lc": "BLEU (lowercased)",
    "bleu_tok_lc": "BLEU (tokenized, lowercased)",
}


@dataclass
class ReportSample:
    """One sentence of a report: its texts, its attention maps (qkvmt.analysis.forced's
    AttentionMap, one per kind), and optionally its own scores and word alignment."""

    source: str
    target: str  # what the decoder was forced with: the hypothesis, or a given reference
    maps: list
    reference: str | None = None
    target_label: str = "hypothesis"
    scores: dict | None = None  # {"bleu": ..., "chrf": ...} of this sentence alone
    alignment: WordAlignment | None = None
    signals: dict[str, list] = field(default_factory=dict)  # the same maps by other signals: {"value_norms": [...]}
    token_scores: list | None = None  # qkvmt.analysis.token_scores.TokenScore of each target token
    source_share: list | None = None  # of each target token: how much of its prediction came from the source (ALTI+)


def attention_report(path, *page) -> None:
    """report.html at `path`: report_page(*page)."""
    write_text(Path(path), report_page(*page))


def report_page(
    metrics: dict,
    samples: list[ReportSample],
    curve: list[dict] = (),
    sentence_signatures: dict | None = None,
    policy: dict | None = None,
    heads=None,
) -> str:
    """Scores with their signatures and checkpoints on top, the run's validation curve when
    there is one, what heads.py found for the checkpoint (a HeadsReport) when it ran, then per
    sample its own BLEU and chrF, an attention viewer, and the word links of the alignment
    `policy` drawn over its word-level cross-attention."""
    top = [metrics_html(metrics)]
    if curve:
        top.append(
            "<h2>Validation during training</h2><p>BLEU on the validation set at each validation "
            'of the checkpoint\'s run (hover a point for chrF).</p><div id="curve"></div>'
        )
    if heads is not None:
        top.append("<h2>Heads</h2>" + heads.section())
    sig = sentence_signatures or {}
    bottom = (
        ('<p class="sig">sentence scores: ' + escape(" · ".join(f"{k} {v}" for k, v in sig.items())) + "</p>")
        if sig
        else ""
    )
    extra = {} if heads is None else {"heads": heads.data()}
    return samples_page("Attention report", samples, policy, top="".join(top), bottom=bottom, curve=curve, data=extra)


def samples_page(
    title: str,
    samples: list[ReportSample],
    policy: dict | None = None,
    top: str = "",
    bottom: str = "",
    curve: list[dict] = (),
    data: dict | None = None,
) -> str:
    """A page of samples between `top` and `bottom` (escaped HTML); `data`: more for the script."""
    shown_policy = ", ".join(f"{k} {v}" for k, v in (policy or {}).items())
    parts, page_data = [top], {"page": "report", "samples": [], "curve": list(curve)}
    for i, s in enumerate(samples):
        texts = [("source", s.source)] + ([("reference", s.reference)] if s.reference is not None else [])
        texts.append((s.target_label, s.target))
        if s.scores:
            texts.append(("sentence scores", f"BLEU {s.scores['bleu']:.1f} · chrF {s.scores['chrf']:.1f}"))
        title_i = f"<h2>Sample {i + 1}</h2>" if len(samples) > 1 or top else ""
        parts.append(
            f'<section class="sample">{title_i}'
            + texts_html(texts)
            + tokens_html(s.token_scores, s.source_share)
            + f'<div class="viewer" data-sample="{i}"></div>'
        )
        sample = {"attention": viewer_maps(s.maps, s.signals), "initial": {}}
        if s.alignment is not None:
            a = s.alignment
            check_labels(a.matrix.shape, a.tgt_words, a.src_words, "word alignment")
            parts.append(
                f"<h3>Word alignment</h3><p>{escape(shown_policy)}: rows are target words, columns source words, "
                f'a dot marks a link.</p><div class="words" data-align="{i}"></div>'
            )
            sample["alignment"] = {
                "matrix": a.matrix,
                "links": [list(x) for x in a.links],
                "src_words": a.src_words,
                "tgt_words": a.tgt_words,
            }
            if policy:  # the viewer opens on the policy's cross-attention head
                sample["initial"] = {"layer": policy["layer"], "head": policy["head"]}
        parts.append("</section>")
        page_data["samples"].append(sample)
    parts.append(bottom)
    return page(title, "".join(parts), page_data | (data or {}))


def tokens_html(scores, source_share=None) -> str:
    """The target's tokens, each shaded by its probability (pale red: unsure), with the
    probability, the entropy, the top alternatives and (ALTI+) its source share on hover; the
    source share is also written under each token."""
    if not scores:
        return ""
    shares = [None] * len(scores) if source_share is None else [float(x) for x in source_share]
    spans = []
    for t, share in zip(scores, shares):
        title = f"p {t.prob:.3f} · entropy {t.entropy:.2f} · top: " + ", ".join(f"{w} {q:.3f}" for w, q in t.top)
        sub = ""
        if share is not None:
            title += f" · source share {share:.2f}"
            sub = f"<sub>{share:.2f}</sub>"
        spans.append(
            f'<span class="tok" style="background:hsl({120 * t.prob:.0f},70%,88%)" title="{escape(title)}">'
            f"{escape(t.token)}{sub}</span>"
        )
    what = "token probabilities" + ("; under each, its source share (ALTI+)" if source_share is not None else "")
    return f'<p class="tokens">{what} (hover for the entropy and the alternatives): {" ".join(spans)}</p>'


def metrics_html(metrics: dict) -> str:
    """Scores with signatures, checkpoints with their hashes, then any other entries as JSON."""
    signatures = metrics.get("signatures", {})
    rows = []
    for key, name in METRIC_NAMES.items():
        if key not in metrics:
            continue
        value, sig = metrics[key], signatures.get(key, "")
        shown = f"{value:.2f}" if isinstance(value, (int, float)) else str(value)
        rows.append(f'<tr><th>{escape(name)}</th><td>{escape(shown)}</td><td class="sig">{escape(sig)}</td></tr>')
    for ckpt in metrics.get("checkpoints", []):
        rows.append(
            f'<tr><th>checkpoint</th><td class="mono">{escape(ckpt.get("path", ""))}</td>'
            f'<td class="sig">sha256 {escape(ckpt.get("sha256", "?"))}</td></tr>'
        )
    skip = set(METRIC_NAMES) | {"signatures", "checkpoints"}
    for key, value in metrics.items():
        if key not in skip:
            shown = json.dumps(plain(value), ensure_ascii=False, default=str)
            rows.append(f'<tr><th>{escape(key)}</th><td colspan="2" class="mono">{escape(shown)}</td></tr>')
    return f'<table class="plain metrics">{"".join(rows)}</table>'
