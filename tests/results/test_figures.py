"""Attention and AER figures: PNGs of the right size, with labels checked, no pyplot state left."""

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest

from qkvmt.results.figures import aer_heatmap, colours, heatmap_grid
from tests.results.test_report import PNG_SIGNATURE, SRC, TGT, H, L, weights


def test_heatmap_grid_writes_png_growing_with_layers_and_heads(tmp_path):
    import matplotlib.pyplot as plt

    figures_before = plt.get_fignums()
    heatmap_grid(weights(1, 1, 4, 5), TGT, SRC, tmp_path / "one.png", title="one")
    heatmap_grid(weights(L, H, 4, 5), TGT, SRC, tmp_path / "grid.png")
    for name in ("one.png", "grid.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_SIGNATURE)
    one, grid = matplotlib.image.imread(tmp_path / "one.png"), matplotlib.image.imread(tmp_path / "grid.png")
    assert 150 < one.shape[0] < 1000 and 150 < one.shape[1] < 1000
    assert grid.shape[0] > 1.5 * one.shape[0] and grid.shape[1] > 2 * one.shape[1]
    assert plt.get_fignums() == figures_before  # nothing left in pyplot's registry
    aer_heatmap(
        np.random.default_rng(0).random((L, H + 1)),
        ["head 0", "head 1", "head 2", "mean"],
        tmp_path / "aer.png",
        title="AER",
    )
    assert (tmp_path / "aer.png").read_bytes().startswith(PNG_SIGNATURE)


def test_heatmap_grid_rejects_labels_that_do_not_fit(tmp_path):
    with pytest.raises(ValueError, match="labels"):
        heatmap_grid(weights(1, 1, 4, 5), SRC, TGT, tmp_path / "x.png")
    with pytest.raises(ValueError, match="AER grid"):
        aer_heatmap(np.zeros((L, H)), ["head 0", "mean"], tmp_path / "x.png")
    with pytest.raises(ValueError, match="layers, heads"):
        heatmap_grid(weights(4, 5), TGT, SRC, tmp_path / "x.png")


def test_heatmap_grid_names_its_colour_bar(tmp_path):
    w = weights(1, 1, 4, 5)
    heatmap_grid(w, TGT, SRC, tmp_path / "weights.png")
    heatmap_grid(w, TGT, SRC, tmp_path / "same.png", label="attention weight")
    heatmap_grid(w, TGT, SRC, tmp_path / "norms.png", label="share of the row's value-weighted norms")
    default, same, norms = (matplotlib.image.imread(tmp_path / f"{n}.png") for n in ("weights", "same", "norms"))
    assert np.array_equal(default, same)  # the default label is the weights' own
    assert default.shape != norms.shape or not np.array_equal(default, norms)


def test_up_to_ten_models_keep_matplotlibs_colours_and_an_eleventh_gets_its_own():
    """The record's figures draw one colour a model; the default cycle would repeat the first."""
    default = [matplotlib.colors.to_rgb(f"C{i}") for i in range(10)]
    assert [matplotlib.colors.to_rgb(c) for c in colours(10)] == default
    many = [matplotlib.colors.to_rgb(c) for c in colours(12)]
    assert len(set(many)) == 12 and many[:10] == default
