"""Attention maps as pictures and as self-contained HTML pages.

* `heatmap_grid`: one PNG with a layer × head grid of heatmaps; `aer_heatmap`:
  alignment error rate per layer × head (matplotlib figures on their own Agg canvas, so no
  pyplot global state and nothing to leak).
* `attention_report`: BLEU/chrF with signatures plus, per sample, an interactive view of the
  encoder self, decoder self and cross attention (kind / layer / head selectors).
* `alignment_page`: one sentence's word alignment from cross attention.
* `inspector_page`: one head's queries, keys, values, scores and weights.

The three pages share one template (`report_template.html`: CSS plus one JavaScript heatmap
renderer). Model output is untrusted text (a translation can contain anything), so every string
Python writes into HTML goes through `html.escape`, and the arrays and tokens the script draws
travel in a JSON block whose "<", ">" and "&" are \\u-escaped, so no "</script>" can end it early;
the script builds the DOM with textContent only.
"""

import html
import json
import re
from importlib import resources
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from qkvmt.alignment.links import to_pharaoh
from qkvmt.files import atomic_write, write_text
from qkvmt.views.sentence_attention import AttentionMap

DECIMALS = 4  # weights in the JSON: enough to read, small enough to keep pages light
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF", "bleu_lc": "BLEU (lowercased)",
                "bleu_tok_lc": "BLEU (tokenized, lowercased)"}


# ---------------------------------------------------------------- PNG


def heatmap_grid(weights, query_tokens: list[str], key_tokens: list[str], path, title: str = "") -> None:
    """Write a PNG with one heatmap per (layer, head) of `weights` (L, H, T_q, T_k)."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 4:
        raise ValueError(f"attention weights must be (layers, heads, queries, keys), got shape {w.shape}")
    n_layers, n_heads, tq, tk = w.shape
    _check_labels(w.shape[2:], query_tokens, key_tokens, "weights")
    # Clip freak tokens so that one cannot squeeze the maps away; then size every panel by its
    # token counts and label lengths (about 0.06 inch a character at 6 pt) so labels keep room.
    query_tokens, key_tokens = [_clip(t) for t in query_tokens], [_clip(t) for t in key_tokens]
    qlen, klen = max(map(len, query_tokens), default=1), max(map(len, key_tokens), default=1)
    pw, ph = 0.8 + 0.17 * tk + 0.06 * qlen, 0.7 + 0.17 * tq + 0.06 * klen
    size = (n_heads * pw + 1.2, n_layers * ph + (0.6 if title else 0.2))
    # Agg cannot draw past 2^16 pixels a side: long sentences × many heads lower the resolution.
    dpi = min(100.0, 16000 / max(size))
    fig = _figure(size)
    axes = fig.subplots(n_layers, n_heads, squeeze=False)
    for l in range(n_layers):
        for h in range(n_heads):
            ax = axes[l, h]
            image = ax.imshow(w[l, h], vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
            ax.set_title(f"layer {l} head {h}", fontsize=8)
            ax.set_xticks(range(tk), key_tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(tq), query_tokens, fontsize=6)
    fig.colorbar(image, ax=axes, shrink=min(1.0, 4 / size[1] + 0.3), label="attention weight")
    _save(fig, path, title, dpi)


def aer_heatmap(grid, col_labels: list[str], path, title: str = "") -> None:
    """Alignment error rate per layer (rows, "layer 0".. as in the config) × head (columns, e.g.
    heads then "mean"), each cell annotated; the lowest (best) is boxed."""
    g = np.asarray(grid, dtype=float)
    row_labels = [f"layer {l}" for l in range(len(g))]
    _check_labels(g.shape, row_labels, col_labels, "AER grid")
    fig = _figure((1.5 + 0.8 * g.shape[1], 1.2 + 0.5 * g.shape[0]))
    ax = fig.subplots()
    # Reversed so the best (lowest) AER is the brightest cell.
    image = ax.imshow(g, vmin=0, vmax=1, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(g.shape[1]), col_labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(g.shape[0]), row_labels, fontsize=8)
    for (r, c), value in np.ndenumerate(g):
        ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white" if value > 0.5 else "black")
    if np.isfinite(g).any():
        r, c = np.unravel_index(np.nanargmin(g), g.shape)
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    fig.colorbar(image, ax=ax, label="AER (lower is better)")
    _save(fig, path, title)


def curve_plot(curve: list[dict], path, title: str = "") -> None:
    """Validation BLEU (and chrF where logged) by training step, as validation_curve gives it."""
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    steps = [p["step"] for p in curve]
    ax.plot(steps, [p["bleu"] for p in curve], marker="o", markersize=3, label="val BLEU")
    chrf = [(p["step"], p["chrf"]) for p in curve if p.get("chrf") is not None]
    if chrf:
        ax.plot(*zip(*chrf), marker="s", markersize=3, label="val chrF")
    ax.set_xlabel("training step")
    ax.set_ylabel("score")
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, path, title)


def _figure(size) -> Figure:
    """A figure on its own Agg canvas: no pyplot registry, so nothing to close or leak."""
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path, title: str, dpi: float = 100.0) -> None:
    if title:
        fig.suptitle(title)
    atomic_write(Path(path), lambda f: fig.savefig(f, format="png", dpi=dpi))


def _clip(token, limit: int = 16) -> str:
    token = str(token)
    return token if len(token) <= limit else token[: limit - 1] + "…"


# ---------------------------------------------------------------- HTML pages


def attention_report(path, metrics: dict, samples: list[dict], curve: list[dict] = (),
                     sentence_signatures: dict | None = None, policy: dict | None = None) -> None:
    """Scores with their signatures and checkpoints on top, the run's validation curve when
    there is one, then per sample its own BLEU and chrF, an attention viewer, and the word
    links of the alignment `policy` drawn over its word-level cross-attention."""
    parts = [_metrics_html(metrics)]
    if curve:
        parts.append('<h2>Validation during training</h2><p>BLEU on the validation set at each validation '
                     "of the checkpoint's run (hover a point for chrF).</p><div id=\"curve\"></div>")
    sig = sentence_signatures or {}
    shown_policy = ", ".join(f"{k} {v}" for k, v in (policy or {}).items())
    data = {"page": "report", "samples": [], "curve": list(curve)}
    for i, s in enumerate(samples):
        texts = [("source", s["source"]), ("reference", s["reference"]), ("hypothesis", s["hypothesis"])]
        if "scores" in s:
            texts.append(("sentence scores", f"BLEU {s['scores']['bleu']:.1f} · chrF {s['scores']['chrf']:.1f}"))
        parts.append(f'<section class="sample"><h2>Sample {i + 1}</h2>' + _texts_html(texts)
                     + f'<div class="viewer" data-sample="{i}"></div>')
        sample = {"attention": _viewer_maps(s["maps"]), "initial": {}}
        if "alignment" in s:
            a = s["alignment"]
            _check_labels(a.matrix.shape, a.tgt_words, a.src_words, "word alignment")
            parts.append(f"<h3>Word alignment</h3><p>{_e(shown_policy)}: rows are target words, columns source words, "
                         f'a dot marks a link.</p><div class="words" data-align="{i}"></div>')
            sample["alignment"] = {"matrix": a.matrix, "links": [list(x) for x in a.links],
                                   "src_words": a.src_words, "tgt_words": a.tgt_words}
            if policy:  # the viewer opens on the policy's cross-attention head
                sample["initial"] = {"layer": policy["layer"], "head": policy["head"]}
        parts.append("</section>")
        data["samples"].append(sample)
    if sig:
        parts.append('<p class="sig">sentence scores: ' + _e(" · ".join(f"{k} {v}" for k, v in sig.items())) + "</p>")
    write_text(Path(path), _page("Attention report", "".join(parts), data))


def _viewer_maps(maps) -> dict:
    """{kind: {label, maps, rows, cols}}: what the page's attention viewer draws, rows and labels
    exactly as the typed maps carry them (qkvmt.views.sentence_attention), never relabelled here."""
    return {m.kind: {"label": m.label, "maps": m.weights, "rows": list(m.rows), "cols": list(m.cols)} for m in maps}


def alignment_page(path, data: dict) -> None:
    """One sentence's word alignment: the word matrix with its hard links, and the subword maps."""
    cross = AttentionMap("cross", np.asarray(data["cross"], dtype=float), data["tgt_tokens"], data["src_tokens"])
    words = np.asarray(data["word_matrix"], dtype=float)
    _check_labels(words.shape, data["tgt_words"], data["src_words"], "word_matrix")
    links = [[int(i), int(j)] for i, j in data["links"]]
    policy = ", ".join(f"{k} {v}" for k, v in data.get("policy", {}).items())
    pharaoh = data.get("pharaoh") or to_pharaoh(links)
    body = (
        _texts_html([("source", data["source"]), ("translation", data["translation"]),
                     ("policy", policy), ("Pharaoh", pharaoh)])
        + "<h2>Word alignment</h2><p>Rows are target words, columns source words; "
          "a dot marks a link.</p><div id=\"words\"></div>"
        + "<h2>Subword cross attention</h2><div id=\"subwords\"></div>"
    )
    page = {"page": "alignment", "attention": _viewer_maps([cross]), "word_matrix": words, "links": links,
            "src_words": data["src_words"], "tgt_words": data["tgt_words"], "policy": data.get("policy", {})}
    write_text(Path(path), _page("Alignment", body, page))


def inspector_page(path, data: dict) -> None:
    """One head's Q/K/V dump: the weights map (hover: score and weight), top keys, the vectors."""
    q_tokens, k_tokens = data["query_tokens"], data["key_tokens"]
    weights, scores = np.asarray(data["weights"], dtype=float), np.asarray(data["scores"], dtype=float)
    _check_labels(weights.shape, q_tokens, k_tokens, "weights")
    _check_labels(scores.shape, q_tokens, k_tokens, "scores")
    top = "".join(
        f'<li><span class="tok">{_e(q_tokens[qi])}</span> attends to '
        + ", ".join(f'<span class="tok">{_e(t["token"])}</span> ({float(t["weight"]):.3f})' for t in entries)
        + "</li>"
        for qi, entries in enumerate(data["top_k"])
    )
    texts = [(k, data[k]) for k in ("source", "target", "d_k") if k in data]
    body = (
        f'<p>{_e(data["kind"])} attention, layer {_e(data["layer"])}, head {_e(data["head"])}</p>'
        + _texts_html(texts)
        + '<h2>Weights</h2><div id="weights"></div>'
        f'<h2>Top keys per query</h2><ol class="topk" start="0">{top}</ol>'
        + _vectors_html("Queries (Q)", q_tokens, data["q"])
        + _vectors_html("Keys (K)", k_tokens, data["k"])
        + _vectors_html("Values (V)", k_tokens, data["v"])
        + _vectors_html("Output (weights · V)", q_tokens, data["output"])
    )
    page = {"page": "inspector", "query_tokens": q_tokens, "key_tokens": k_tokens,
            "weights": weights, "scores": scores}
    write_text(Path(path), _page("Attention inspector", body, page))


# ---------------------------------------------------------------- shared pieces


def _page(title: str, body_html: str, data: dict) -> str:
    """The shared chrome around `body_html` (already escaped HTML) with `data` as inline JSON."""
    template = resources.files("qkvmt.views").joinpath("report_template.html").read_text(encoding="utf-8")
    slots = {"title": _e(title), "body": body_html, "data": _script_json(data)}
    # One pass, so text inserted into one slot is never scanned for another slot's marker.
    return re.sub(r"\{\{(title|body|data)\}\}", lambda m: slots[m.group(1)], template)


def _script_json(data) -> str:
    """JSON that is safe inside <script>: the \\u escapes mean the same string to JSON.parse,
    but the HTML parser never sees a "<" (so no "</script>" or "<!--") or an entity."""
    text = json.dumps(_plain(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def _plain(x):
    """Arrays and numpy scalars as JSON-ready lists, rounded; non-finite numbers (a masked
    score is -inf) become null, which JSON can express and the page shows as masked."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
        a = np.round(x.astype(float), DECIMALS)
        return np.where(np.isfinite(a), a, None).tolist()
    if isinstance(x, (list, tuple, np.ndarray)):
        return [_plain(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return round(float(x), DECIMALS) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _texts_html(pairs) -> str:
    return '<dl class="texts">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in pairs) + "</dl>"


def _metrics_html(metrics: dict) -> str:
    """Scores with signatures, checkpoints with their hashes, then any other entries as JSON."""
    signatures = metrics.get("signatures", {})
    rows = []
    for key, name in METRIC_NAMES.items():
        if key not in metrics:
            continue
        value, sig = metrics[key], signatures.get(key, "")
        shown = f"{value:.2f}" if isinstance(value, (int, float)) else str(value)
        rows.append(f'<tr><th>{_e(name)}</th><td>{_e(shown)}</td><td class="sig">{_e(sig)}</td></tr>')
    for ckpt in metrics.get("checkpoints", []):
        rows.append(f'<tr><th>checkpoint</th><td class="mono">{_e(ckpt.get("path", ""))}</td>'
                    f'<td class="sig">sha256 {_e(ckpt.get("sha256", "?"))}</td></tr>')
    skip = set(METRIC_NAMES) | {"signatures", "checkpoints"}
    for key, value in metrics.items():
        if key not in skip:
            shown = json.dumps(_plain(value), ensure_ascii=False, default=str)
            rows.append(f'<tr><th>{_e(key)}</th><td colspan="2" class="mono">{_e(shown)}</td></tr>')
    return f'<table class="plain metrics">{"".join(rows)}</table>'


def _vectors_html(caption: str, tokens, vectors) -> str:
    """A token × dimension table, three decimals per value."""
    v = np.asarray(vectors, dtype=float)
    if v.ndim != 2 or len(v) != len(tokens):
        raise ValueError(f"{caption}: expected one vector per token ({len(tokens)}), got shape {v.shape}")
    head = "<tr><th></th>" + "".join(f"<th>{d}</th>" for d in range(v.shape[1])) + "</tr>"
    body = "".join(
        f"<tr><th>{_e(t)}</th>" + "".join(f"<td>{x:.3f}</td>" for x in row) + "</tr>" for t, row in zip(tokens, v)
    )
    return f'<h2>{_e(caption)}</h2><div class="scroll"><table class="plain num">{head}{body}</table></div>'


def _check_labels(shape, rows, cols, what: str) -> None:
    """Labels are drawn by position, so a length mismatch would silently mislabel the map.
    An empty map (an empty translation: JSON gives [] whatever the other side) needs no labels."""
    if 0 in shape and 0 in (len(rows), len(cols)):
        return
    if tuple(shape) != (len(rows), len(cols)):
        raise ValueError(f"{what}: map is {tuple(shape)} but there are {len(rows)} query and {len(cols)} key labels")
