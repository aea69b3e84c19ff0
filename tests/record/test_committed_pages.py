"""README.md's, docs/results.md's and docs/analysis.md's tables are what docs/runs.json gives: a figure changed by
hand, or a run added without regenerating, fails here (qkvmt results rewrites them). docs/analysis.md's
tables of signals, kinds and alignment settings are what the registries give, checked the same way."""

import pytest

from qkvmt.record import pages, record_file, settings
from qkvmt.studies.recorded import counted
from tests.conftest import CONF, ROOT

RECORD = ROOT / "docs" / "runs.json"


@pytest.mark.parametrize(
    "page, required",
    [
        ("README.md", (None,)),
        ("docs/results.md", ("recipes", "runs")),
        ("docs/analysis.md", ("signals", "kinds", "policy", "faithfulness", "kv-study", "ablations", "lens")),
    ],
)
def test_the_committed_tables_agree_with_the_record(page, required):
    text = (ROOT / page).read_text(encoding="utf-8")
    wanted = pages.render(text, record_file.load(RECORD), page, required)
    assert text == wanted, f"{page}'s tables differ from {RECORD.name}: run qkvmt results"


def test_every_counted_run_ran_at_its_recipes_settings_as_they_are_now():
    """A recipe changed after its runs: mark them settings_current false (with a settings_note)
    and regenerate, so that no table counts them for the recipe as it is."""
    stale = []
    for run in record_file.load(RECORD)["runs"]:
        if run["kind"] == "train" and counted(run):
            changed = settings.differences(
                run["settings"], settings.recipe_now(run["experiment"], run["overrides"], CONF)
            )
            stale += [f"{run['id']}: {c}" for c in changed]
    assert not stale, "runs counted at settings their recipe no longer has:\n" + "\n".join(stale)
