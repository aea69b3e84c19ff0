"""Figures of one sentence beyond the layer × head grids (figures.heatmap_grid), each a PNG
drawn from what the Python API returns:

* `head_figure`: one head's weights α, what each key's value adds per unit of weight
  ‖W_O^h v_j‖, and their product, what each key hands the query (HeadInspection);
* `flow_figure`: ALTI+'s source contributions after each decoder layer, and each predicted
  token's source share (the cross map of signal "alti");
* `links_figure`: the word matrix an alignment policy reads, with its links (SentenceAlignment);
* `swap_figure`: one cross-attention map as the original and each edit leave it, titled with the
  translation each gives (Intervention).
"""

import numpy as np

from qkvmt.results.figures import _clip, _figure, _save
from qkvmt.results.html import check_labels


def head_figure(weights, value_norms, query_tokens: list[str], key_tokens: list[str], path, title: str = "") -> None:
    """Three panels: the weights (T_q, T_k), the value norms (T_k,) as bars under the same keys,
    and weights × value norms, the vectors' norms that reach the head's output."""
    w, norms = np.asarray(weights, dtype=float), np.asarray(value_norms, dtype=float)
    check_labels(w.shape, query_tokens, key_tokens, "weights")
    if norms.shape != (w.shape[1],):
        raise ValueError(f"value norms are {norms.shape}, but the head has {w.shape[1]} keys")
    rows, cols = [_clip(t) for t in query_tokens], [_clip(t) for t in key_tokens]
    pw, ph = _panel(len(cols), len(rows), rows, cols)
    fig = _figure((3 * pw + 1.5, ph + (0.6 if title else 0.2)))
    left, middle, right = fig.subplots(1, 3)
    _map(left, w, rows, cols, "weight α", vmax=1.0, fig=fig)
    middle.bar(range(len(cols)), norms, color="tab:orange")
    middle.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
    middle.set_title("‖W_O v‖ of each key", fontsize=8)
    middle.tick_params(axis="y", labelsize=6)
    middle.grid(axis="y", alpha=0.3)
    _map(right, w * norms[None, :], rows, cols, "α·‖W_O v‖", vmax=None, fig=fig)
    _save(fig, path, title)


def flow_figure(source, share, rows: list[str], cols: list[str], path, title: str = "") -> None:
    """ALTI+ after each decoder layer (source: (L, T, S), every layer on one scale) and
    each row's source share (share: (T,), the sum of the last layer's row) as bars beside."""
    s, share = np.asarray(source, dtype=float), np.asarray(share, dtype=float)
    if s.ndim != 3:
        raise ValueError(f"contributions must be (layers, target tokens, source tokens), got shape {s.shape}")
    check_labels(s.shape[1:], rows, cols, "contributions")
    if share.shape != (s.shape[1],):
        raise ValueError(f"source shares are {share.shape}, but there are {s.shape[1]} target tokens")
    rows, cols = [_clip(t) for t in rows], [_clip(t) for t in cols]
    pw, ph = _panel(len(cols), len(rows), rows, cols)
    fig = _figure((len(s) * pw + 0.4 + 0.1 * len(rows) + 2.4, ph + (0.6 if title else 0.2)))
    axes = fig.subplots(1, len(s) + 1, width_ratios=[pw] * len(s) + [1.6])
    top = max(float(s.max()), 1e-6)  # one scale for every layer, up to the largest contribution
    for layer, ax in enumerate(axes[:-1]):
        image = ax.imshow(s[layer], vmin=0, vmax=top, cmap="viridis", aspect="auto", interpolation="nearest")
        _ticks(ax, rows if layer == 0 else [""] * len(rows), cols)
        ax.set_title(f"after decoder layer {layer}", fontsize=8)
    fig.colorbar(image, ax=list(axes[:-1]), shrink=0.8, label="contribution to the prediction")
    bars = axes[-1]
    bars.barh(range(len(rows)), share, color="tab:green")
    bars.set_ylim(len(rows) - 0.5, -0.5)  # the rows of the maps beside it, top to bottom
    bars.set_yticks(range(len(rows)), rows, fontsize=6)
    bars.set_xlim(0, 1)
    bars.tick_params(axis="x", labelsize=6)
    bars.set_title("source share", fontsize=8)
    bars.grid(axis="x", alpha=0.3)
    _save(fig, path, title)


def links_figure(matrix, tgt_words: list[str], src_words: list[str], links, path, title: str = "") -> None:
    """The word matrix (target words × source words) with a red box on each link (i, j):
    source word i, target word j, as Pharaoh's i-j."""
    m = np.asarray(matrix, dtype=float)
    check_labels(m.shape, tgt_words, src_words, "word_matrix")
    rows, cols = [_clip(t) for t in tgt_words], [_clip(t) for t in src_words]
    pw, ph = _panel(len(cols), len(rows), rows, cols, cell=0.3)
    fig = _figure((max(pw + 1.2, 5.0), ph + (0.8 if title else 0.2)))
    ax = fig.subplots()
    _map(ax, m, rows, cols, "the policy's attention between words", vmax=1.0, fig=fig)
    for i, j in links:
        ax.add_patch(_box(i, j))
    _save(fig, path, title)


def swap_figure(
    maps, titles: list[str], rows: list[str], cols: list[str], marked: tuple[int, int], path, title=""
) -> None:
    """Panels side by side, one map (T, S) each over the same rows and columns, titled with what
    each is; the two source columns `marked` framed, so the eye finds what moved."""
    m = np.asarray(maps, dtype=float)
    for one in m:
        check_labels(one.shape, rows, cols, "cross-attention")
    rows, cols = [_clip(t) for t in rows], [_clip(t) for t in cols]
    pw, ph = _panel(len(cols), len(rows), rows, cols)
    fig = _figure((len(m) * pw + 1.0, ph + 0.9 + (0.4 if title else 0.0)))
    for i, (ax, values, name) in enumerate(zip(fig.subplots(1, len(m)), m, titles)):
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        _ticks(ax, rows if i == 0 else [""] * len(rows), cols)
        ax.set_title(name, fontsize=7, wrap=True)
        for c in marked:
            ax.add_patch(_column(c, len(rows)))
    fig.colorbar(image, ax=fig.axes, shrink=0.8).ax.tick_params(labelsize=6)
    _save(fig, path, title)


def _column(c: int, n_rows: int):
    from matplotlib.patches import Rectangle

    return Rectangle((c - 0.5, -0.5), 1, n_rows, fill=False, edgecolor="white", linewidth=1.2, linestyle="--")


def _panel(n_cols: int, n_rows: int, rows: list[str], cols: list[str], cell: float = 0.17) -> tuple[float, float]:
    """A map's size in inches: its cells, and room for its labels (about 0.06 inch a character at 6 pt)."""
    qlen, klen = max(map(len, rows), default=1), max(map(len, cols), default=1)
    return 0.8 + cell * n_cols + 0.06 * qlen, 0.7 + cell * n_rows + 0.06 * klen


def _map(ax, values, rows, cols, label: str, vmax, fig) -> None:
    image = ax.imshow(values, vmin=0, vmax=vmax, cmap="viridis", aspect="auto", interpolation="nearest")
    _ticks(ax, rows, cols)
    ax.set_title(label, fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.8).ax.tick_params(labelsize=6)


def _ticks(ax, rows, cols) -> None:
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
    ax.set_yticks(range(len(rows)), rows, fontsize=6)


def _box(i: int, j: int):
    from matplotlib.patches import Rectangle

    return Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5)
