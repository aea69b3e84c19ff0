"""README.md's and docs/results.md's tables are what docs/runs.json gives: a figure changed by
hand, or a run added without regenerating, fails here (python scripts/results.py rewrites them)."""

import pytest

from qkvmt.record import pages, runs
from tests.conftest import ROOT

RECORD = ROOT / "docs" / "runs.json"


@pytest.mark.parametrize("page, required", [("README.md", (None,)), ("docs/results.md", ("recipes", "runs"))])
def test_the_committed_tables_agree_with_the_record(page, required):
    text = (ROOT / page).read_text(encoding="utf-8")
    wanted = pages.render(text, runs.load(RECORD), page, required)
    assert text == wanted, f"{page}'s tables differ from {RECORD.name}: run python scripts/results.py"
