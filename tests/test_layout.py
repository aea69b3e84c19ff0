"""CONTRIBUTING.md's map of the tree stays true to it: every path that "Where a new ... goes" names
exists (a `<name>` stands for any name, so an existing example must match), and the Layout names
every package under src/qkvmt."""

import re

from tests.conftest import ROOT

CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "src" / "qkvmt"


def section(title: str) -> str:
    """The text of CONTRIBUTING.md's section `title`, up to the next heading of its level or above."""
    level, _, _ = title.partition(" ")
    start = CONTRIBUTING.index(f"\n{title}\n")
    end = re.search(rf"\n#{{1,{len(level)}}} ", CONTRIBUTING[start + 1 :])
    return CONTRIBUTING[start : start + 1 + end.start()] if end else CONTRIBUTING[start:]


def mapped_paths() -> list[str]:
    """The paths the map names: backquoted, with a folder in them."""
    quoted = re.findall(r"`([^`\s]+)`", section("### Where a new ... goes"))
    return [q for q in quoted if "/" in q]


def test_the_map_names_a_path_for_each_kind():
    kinds = re.findall(r"^- \*\*([^*]+)\*\*:", section("### Where a new ... goes"), re.MULTILINE)
    assert kinds == ["study", "signal", "edit", "site", "model family", "explorer panel", "command"]
    assert mapped_paths()


def test_every_path_the_map_names_exists():
    missing = [p for p in mapped_paths() if not list(ROOT.glob(re.sub(r"<[^>]+>", "*", p).rstrip("/")))]
    assert not missing, f"CONTRIBUTING.md's map names paths that match nothing: {missing}"


def test_the_layout_names_every_package():
    layout = section("## Layout")
    packages = sorted(p.parent.relative_to(PACKAGE) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
    unnamed = [str(p) for p in packages if not re.search(rf"(^|[\s(`]){re.escape(p.name)}/", layout, re.MULTILINE)]
    assert not unnamed, f"CONTRIBUTING.md's Layout names no {unnamed}: give each package its line"
