"""Attention maps and scores as PNG figures, each on its own Agg canvas (no pyplot global
state, nothing to leak), written atomically; matplotlib is imported when the first one is drawn, not
by what only loads or translates with a model:

* `heatmap_grid`: one heatmap per layer × head of one kind of attention;
* `aer_heatmap`: alignment error rate per layer × head, the best boxed;
* `curve_plot`: validation BLEU (and chrF) by training step.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from qkvmt.files import atomic_write
from qkvmt.results.html import check_labels

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def heatmap_grid(
    weights, query_tokens: list[str], key_tokens: list[str], path, title: str = "", label: str = "attention weight"
) -> None:
    """Write a PNG with one heatmap per (layer, head) of `weights` (L, H, T_q, T_k), each in
    [0, 1] (another signal normalised first), under a colour bar named `label`."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 4:
        raise ValueError(f"attention weights must be (layers, heads, queries, keys), got shape {w.shape}")
    n_layers, n_heads, tq, tk = w.shape
    check_labels(w.shape[2:], query_tokens, key_tokens, "weights")
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
    for li in range(n_layers):
        for h in range(n_heads):
            ax = axes[li, h]
            image = ax.imshow(w[li, h], vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
            ax.set_title(f"layer {li} head {h}", fontsize=8)
            ax.set_xticks(range(tk), key_tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(tq), query_tokens, fontsize=6)
    fig.colorbar(image, ax=axes, shrink=min(1.0, 4 / size[1] + 0.3), label=label)
    _save(fig, path, title, dpi)


def aer_heatmap(grid, col_labels: list[str], path, title: str = "") -> None:
    """Alignment error rate per layer (rows, "layer 0".. as in the config) × head (columns, e.g.
    heads then "mean"), each cell annotated; the lowest (best) is boxed."""
    g = np.asarray(grid, dtype=float)
    row_labels = [f"layer {i}" for i in range(len(g))]
    check_labels(g.shape, row_labels, col_labels, "AER grid")
    fig = _figure((1.5 + 0.8 * g.shape[1], 1.2 + 0.5 * g.shape[0]))
    ax = fig.subplots()
    # Reversed so the best (lowest) AER is the brightest cell.
    image = ax.imshow(g, vmin=0, vmax=1, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(g.shape[1]), col_labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(g.shape[0]), row_labels, fontsize=8)
    for (r, c), value in np.ndenumerate(g):
        ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white" if value > 0.5 else "black")
    if np.isfinite(g).any():
        from matplotlib.patches import Rectangle

        r, c = np.unravel_index(np.nanargmin(g), g.shape)
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
    fig.colorbar(image, ax=ax, label="AER (lower is better)")
    _save(fig, path, title)


def curve_plot(
    curve: list[dict], path, title: str = "", x: str = "step", xlabel: str = "training step", prefix: str = "val "
) -> None:
    """BLEU (and chrF where known) against `x`: by default the validation curve by training step,
    as validation_curve gives it; heads.py draws BLEU against the heads removed."""
    fig = _figure((6, 3.5))
    ax = fig.subplots()
    steps = [p[x] for p in curve]
    ax.plot(steps, [p["bleu"] for p in curve], marker="o", markersize=3, label=f"{prefix}BLEU")
    chrf = [(p[x], p["chrf"]) for p in curve if p.get("chrf") is not None]
    if chrf:
        ax.plot(*zip(*chrf), marker="s", markersize=3, label=f"{prefix}chrF")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("score")
    ax.grid(alpha=0.3)
    ax.legend()
    _save(fig, path, title)


def colours(n: int) -> list:
    """n colours told apart, one a model: matplotlib's ten (tab20's dark half, in order), then
    tab20's pale half, where the default cycle would give the eleventh model the first's colour."""
    from matplotlib import colormaps

    tab20 = colormaps["tab20"].colors
    palette = [*tab20[0::2], *tab20[1::2]]
    return [palette[i % len(palette)] for i in range(n)]


def _figure(size) -> "Figure":
    """A figure on its own Agg canvas: no pyplot registry, so nothing to close or leak."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: "Figure", path, title: str, dpi: float = 100.0) -> None:
    if title:
        fig.suptitle(title)
    atomic_write(Path(path), lambda f: fig.savefig(f, format="png", dpi=dpi))


def _clip(token, limit: int = 16) -> str:
    token = str(token)
    return token if len(token) <= limit else token[: limit - 1] + "…"
