"""The explorer's screenshot for the README: the page down to the attention viewer, the same
PNG on a rerun, and a clear Unavailable where no browser is installed."""

import shutil

import matplotlib.image
import pytest

from qkvmt.explore.screenshot import BROWSERS, Unavailable, screenshot
from tests.explore.conftest import SOURCE

VIEW = {"kind": "cross", "signal": "weights", "layer": 1, "head": "mean"}


def test_the_page_down_to_the_viewer_the_same_on_a_rerun(model, tmp_path):
    if not any(map(shutil.which, BROWSERS)):
        pytest.skip("no headless Chromium on PATH (Debian: apt-get install chromium); CI installs it")
    first = screenshot(model, SOURCE, tmp_path / "a.png", VIEW, width=800, scale=1.0)
    second = screenshot(model, SOURCE, tmp_path / "b.png", VIEW, width=800, scale=1.0)
    assert first.read_bytes() == second.read_bytes()
    height, width = matplotlib.image.imread(first).shape[:2]
    assert width == 800 and 300 < height < 3000  # the form, the translation and one map, not the whole page
    wider = screenshot(model, SOURCE, tmp_path / "c.png", VIEW, width=800, scale=2.0)
    sharp_height, sharp_width = matplotlib.image.imread(wider).shape[:2]
    assert sharp_width == 1600 and sharp_height == pytest.approx(2 * height, abs=8)  # text may lay out a pixel apart


def test_without_a_browser_it_says_what_to_install(model, tmp_path, monkeypatch):
    monkeypatch.setattr("qkvmt.explore.screenshot.shutil.which", lambda name: None)
    with pytest.raises(Unavailable, match="apt-get install chromium"):
        screenshot(model, SOURCE, tmp_path / "x.png", VIEW)
    assert not (tmp_path / "x.png").exists()
