"""One sentence's head, flow and links figures: PNGs that grow with what they draw, labels and
shapes checked, nothing left in pyplot's registry."""

import matplotlib.image
import numpy as np
import pytest

from qkvmt.results.sentence_figures import flow_figure, head_figure, links_figure
from tests.results.test_report import PNG_SIGNATURE, SRC, TGT, weights


def test_each_figure_writes_a_png_that_grows_with_its_tokens(tmp_path):
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    w = weights(4, 5)
    head_figure(w, np.arange(5.0), TGT, SRC, tmp_path / "head.png", title="one head")
    flow_figure(weights(3, 4, 5) / 2, w.sum(-1) / 2, TGT, SRC, tmp_path / "flow.png")
    flow_figure(weights(1, 4, 5) / 2, w.sum(-1) / 2, TGT, SRC, tmp_path / "flow_one.png")
    links_figure(w, TGT, SRC, [(0, 1), (4, 3)], tmp_path / "links.png", title="word links 0-1 4-3")
    for name in ("head", "flow", "flow_one", "links"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE)
    three, one = (matplotlib.image.imread(tmp_path / f"{n}.png") for n in ("flow", "flow_one"))
    assert three.shape[1] > 1.5 * one.shape[1]  # a panel per decoder layer
    assert plt.get_fignums() == before


def test_a_link_is_drawn_where_pharaoh_puts_it(tmp_path):
    rows, cols = [f"t{j}" for j in range(6)], [f"s{i}" for i in range(7)]

    def red_box_centre(link):  # on an all-zero (dark) matrix, the link's box is the only red
        links_figure(np.zeros((6, 7)), rows, cols, [link], tmp_path / "x.png")
        rgb = matplotlib.image.imread(tmp_path / "x.png")[..., :3]
        red = np.argwhere((rgb[..., 0] > 0.8) & (rgb[..., 1] < 0.3) & (rgb[..., 2] < 0.3))
        return red.mean(0)  # (y, x)

    first, middle, last = (red_box_centre(link) for link in [(1, 1), (3, 2), (5, 3)])  # inside: no box cut by the frame
    assert last[1] > first[1] + 100 and last[0] > first[0] + 50  # source words left to right, target words down
    np.testing.assert_allclose(middle, (first + last) / 2, atol=2)  # Pharaoh's i-j: column i, row j


def test_shapes_and_labels_that_do_not_fit_are_refused(tmp_path):
    w = weights(4, 5)
    with pytest.raises(ValueError, match="labels"):
        head_figure(w, np.ones(5), SRC, TGT, tmp_path / "x.png")
    with pytest.raises(ValueError, match="value norms"):
        head_figure(w, np.ones(4), TGT, SRC, tmp_path / "x.png")
    with pytest.raises(ValueError, match="layers, target tokens"):
        flow_figure(w, np.ones(4), TGT, SRC, tmp_path / "x.png")
    with pytest.raises(ValueError, match="source shares"):
        flow_figure(weights(2, 4, 5), np.ones(5), TGT, SRC, tmp_path / "x.png")
    with pytest.raises(ValueError, match="labels"):
        links_figure(w, SRC, TGT, [], tmp_path / "x.png")
    assert not list(tmp_path.iterdir())
