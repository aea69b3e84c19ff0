"""The one way qkvmt writes HTML: every page (report.html, alignment.html, inspect.html, and what
a result shows in a notebook) is `page(title, body, data)` around one template.

The template (`report_template.html`) holds the CSS and the chrome; `scripts/*.js` (SCRIPTS),
joined into its one script, are the one JavaScript renderer for heatmaps, attention viewers, word
alignments, curves, the inspector and the explorer. Model output is untrusted text (a translation
can contain anything), so every string Python writes into HTML goes through `escape`, and the
arrays and tokens the script draws travel in a JSON block whose "<", ">" and "&" are
\\u-escaped, so no "</script>" can end it early; the script builds the DOM with textContent only.
"""

import html
import json
import re
from importlib import resources

import numpy as np

from qkvmt.text.sinks import described, sink_columns

# The template's one script, in this order: the files are parts of one closure, and each uses
# what the ones before it define (draw.js: colours, heatmaps, alignments, curves, the inspector's
# maps; viewer.js: the attention viewer; lens_panel.js: the explorer's layers panel; explorer.js:
# the explorer page; pages.js: what each page draws, chosen by data["page"]).
SCRIPTS = ("draw.js", "viewer.js", "lens_panel.js", "explorer.js", "pages.js")
DECIMALS = 4  # numbers in a page's JSON: enough to read, small enough to keep pages light
NOTEBOOK_HEIGHT = 640  # pixels of a result's frame in a notebook; the frame can be resized
# The kinds whose maps come without their sinks when asked: cross-attention's is the map read as
# "which source word each target word looks at", which the sinks' mass misleads.
SINKLESS = ("cross",)


def page(title: str, body_html: str, data: dict, fetches: bool = False) -> str:
    """The shared chrome around `body_html` (already escaped HTML) with `data` as inline JSON;
    data["page"] names what the script draws (report, alignment, inspector, explorer).
    fetches: the page may ask its own server for JSON (the explorer); a saved page may not."""
    views = resources.files("qkvmt.results")
    template = views.joinpath("report_template.html").read_text(encoding="utf-8")
    script = "".join(views.joinpath("scripts", name).read_text(encoding="utf-8") for name in SCRIPTS)
    slots = {
        "title": escape(title),
        "body": body_html,
        "data": script_json(data),
        "script": script,
        "connect": "'self'" if fetches else "'none'",
    }
    # One pass, so text inserted into one slot is never scanned for another slot's marker.
    return re.sub(r"\{\{(title|body|data|connect|script)\}\}", lambda m: slots[m.group(1)], template)


def notebook_frame(page_html: str) -> str:
    """A whole page as one notebook output: a sandboxed iframe, so the page's script and CSS run
    as they do in the saved file and touch nothing of the notebook's own."""
    return (
        f'<iframe srcdoc="{escape(page_html)}" sandbox="allow-scripts" '
        f'style="width:100%;height:{NOTEBOOK_HEIGHT}px;border:1px solid #ddd;resize:vertical"></iframe>'
    )


def script_json(data) -> str:
    """JSON that is safe inside <script>: the \\u escapes mean the same string to JSON.parse,
    but the HTML parser never sees a "<" (so no "</script>" or "<!--") or an entity."""
    text = json.dumps(plain(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def plain(x):
    """Arrays and numpy scalars as JSON-ready lists, rounded; non-finite numbers (a masked
    score is -inf) become null, which JSON can express and the page shows as masked."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiub":
        a = np.round(x.astype(float), DECIMALS)
        return np.where(np.isfinite(a), a, None).tolist()
    if isinstance(x, (list, tuple, np.ndarray)):
        return [plain(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return round(float(x), DECIMALS) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def escape(x) -> str:
    return html.escape(str(x), quote=True)


def texts_html(pairs) -> str:
    """(label, text) pairs as a definition list."""
    return '<dl class="texts">' + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs) + "</dl>"


def table_html(header: list[str], rows: list[list]) -> str:
    """A table of text cells, each escaped (a result's scores, a word grid)."""
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table class="plain">{head}{body}</table></div>'


def vectors_html(caption: str, tokens, vectors) -> str:
    """A token × dimension table, three decimals per value."""
    v = np.asarray(vectors, dtype=float)
    if v.ndim != 2 or len(v) != len(tokens):
        raise ValueError(f"{caption}: expected one vector per token ({len(tokens)}), got shape {v.shape}")
    head = "<tr><th></th>" + "".join(f"<th>{d}</th>" for d in range(v.shape[1])) + "</tr>"
    body = "".join(
        f"<tr><th>{escape(t)}</th>" + "".join(f"<td>{x:.3f}</td>" for x in row) + "</tr>" for t, row in zip(tokens, v)
    )
    return f'<h2>{escape(caption)}</h2><div class="scroll"><table class="plain num">{head}{body}</table></div>'


def viewer_maps(maps, signals: dict[str, list] | None = None, drop=()) -> dict:
    """{kind: {label, maps, layers, rows, cols[, sinks, without][, signals: {name: {label, maps, layers[, without]}}]}}:
    what a page's attention viewer draws, rows and labels exactly as the typed maps carry them
    (qkvmt.analysis.forced.AttentionMap), never relabelled here. `maps` and `layers` are the
    weights per head and each layer as a whole (the heads' average); `signals` the same of other
    signals, labelled as the registry labels them, `maps` None where one has no per-head maps.
    drop: sinks (qkvmt.text.sinks) each map of a SINKLESS kind also comes `without` (`sinkless`),
    its kind saying what they are (`sinks`)."""
    out = {m.kind: {"label": m.label, "rows": list(m.rows), "cols": list(m.cols)} | drawn(m, drop) for m in maps}
    for entry in out.values():
        if "without" in entry:
            entry["sinks"] = described(drop)
    for name, other in (signals or {}).items():
        for m in other:
            out[m.kind].setdefault("signals", {})[name] = {"label": m.signal_label} | drawn(m, drop)
    return out


def drawn(m, drop) -> dict:
    """One map's numbers as the viewer draws them and, with `drop` and a SINKLESS kind, `without` them."""
    out = {"maps": m.weights, "layers": m.layers}
    return (out | {"without": sinkless(m, drop)}) if drop and m.kind in SINKLESS else out


def sinkless(m, drop) -> dict:
    """The map without the key columns `drop` names, rows renormalized (AttentionMap.without): its
    label, maps, layers, cols and `kept` (the columns kept, as positions in the whole map's); or,
    for a map that cannot be renormalized (negative values: not shares), {"refused": why}."""
    try:
        cut = m.without(drop)
    except ValueError as e:
        return {"refused": str(e)}
    kept = np.flatnonzero(~sink_columns(m.cols, drop)).tolist()
    return {"label": cut.signal_label, "maps": cut.weights, "layers": cut.layers, "cols": cut.cols, "kept": kept}


def check_labels(shape, rows, cols, what: str) -> None:
    """Labels are drawn by position, so a length mismatch would silently mislabel the map.
    An empty map (an empty translation: JSON gives [] whatever the other side) needs no labels."""
    if 0 in shape and 0 in (len(rows), len(cols)):
        return
    if tuple(shape) != (len(rows), len(cols)):
        raise ValueError(f"{what}: map is {tuple(shape)} but there are {len(rows)} query and {len(cols)} key labels")
