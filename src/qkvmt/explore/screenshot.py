"""A screenshot of the explorer on a model, with a sentence typed and translated, as the README
shows it: the page served on a free loopback port, driven by headless Chromium through
Playwright (the `dev` extra), as tests/explore/test_browser.py drives it.

Chromium is not a dependency: without it, or without Playwright, `screenshot` raises
Unavailable, saying what to install, and the caller leaves the screenshot out.
"""

import shutil
from pathlib import Path

from qkvmt.api import Model
from qkvmt.explore.app import create_app
from qkvmt.explore.session import Explorer
from qkvmt.files import atomic_write
from qkvmt.web.guard import Access
from qkvmt.web.json_api import bind, in_thread

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
# Quiet and reproducible: no background traffic, no GPU compositing.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--font-render-hinting=none",
]


class Unavailable(Exception):
    """No headless browser to take the screenshot with."""


def screenshot(model: Model, sentence: str, path, view: dict, width: int = 840, scale: float = 2.0) -> Path:
    """Write a PNG of the explorer's page over `model` after `sentence` is translated, with the
    attention viewer set to `view` ({kind, layer, head, signal}): the page from its top to the
    viewer's bottom, in a `width`-wide window at `scale` device pixels per CSS pixel (by default
    as wide as a README's column on a code host, sharp on a high-density screen)."""
    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    if binary is None:
        raise Unavailable("no Chromium on PATH (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise Unavailable('Playwright is not installed (pip install -e ".[dev]")') from None
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    with in_thread(create_app(Explorer(model), Access.of("127.0.0.1", port)), sock):
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=binary, args=FLAGS)
            try:
                page = browser.new_page(viewport={"width": width, "height": 800}, device_scale_factor=scale)
                page.goto(f"http://127.0.0.1:{port}/")
                page.fill("#source", sentence)
                page.click("#ask button")
                page.wait_for_selector("body[data-state=shown]", timeout=120_000)
                viewer = page.locator("#viewer")
                for name in ("kind", "signal", "layer", "head"):
                    viewer.locator(f"select.{name}").select_option(str(view[name]))
                box = viewer.bounding_box()
                clip = {"x": 0, "y": 0, "width": width, "height": box["y"] + box["height"] + 8}
                png = page.screenshot(clip=clip, full_page=True, animations="disabled", caret="hide")
            finally:
                browser.close()
    atomic_write(Path(path), lambda f: f.write(png))
    return Path(path)
