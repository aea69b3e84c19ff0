"""The fast suite's contract: a test that trains, however indirectly, is marked slow, and one that
trains without the marker fails instead of slowing `-m "not slow"` down."""

import tests.conftest as conftest
from tests.conftest import ROOT

pytest_plugins = ["pytester"]

# A toy suite using the real machinery: a training fixture, a fixture built on it, and tests that
# use either, neither, or train by hand.
CONFTEST = """
import pytest
from tests.conftest import pytest_collection_modifyitems, train_only_when_slow, training_fixture

@training_fixture(scope="session")
def toy_run():
    return "trained"

@pytest.fixture
def evaluated(toy_run):
    return toy_run + ", evaluated"
"""

TESTS = """
import pytest

def test_plain():
    pass

def test_uses_the_training_fixture(toy_run):
    pass

def test_uses_it_through_another_fixture(evaluated):
    pass

def test_trains_by_hand_without_the_marker():
    from lightning.pytorch import Trainer
    Trainer.fit(None)

@pytest.mark.slow
def test_marked_by_hand():
    pass
"""


def project_settings() -> str:
    """pyproject.toml's pytest section as written: its markers and strictness, for the toy suite."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text[text.index("[tool.pytest.ini_options]") :]
    following = section.find("\n[")
    return section if following < 0 else section[:following]


def test_training_fixtures_mark_their_tests_slow_and_unmarked_training_fails(pytester, monkeypatch):
    monkeypatch.setattr(conftest, "TRAINING_FIXTURES", set())  # the toy fixture stays out of the real registry
    pytester.makepyprojecttoml(project_settings())
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_toy=TESTS)

    fast = pytester.runpytest("test_toy.py", "-m", "not slow", "-p", "no:cacheprovider")
    fast.assert_outcomes(passed=1, failed=1, deselected=3)
    fast.stdout.fnmatch_lines(["*test_trains_by_hand_without_the_marker trains a model: mark it @pytest.mark.slow*"])
    assert conftest.TRAINING_FIXTURES == {"toy_run"}

    slow = pytester.runpytest("test_toy.py", "-m", "slow", "-p", "no:cacheprovider", "-v")
    slow.assert_outcomes(passed=3, deselected=2)
    slow.stdout.fnmatch_lines_random(
        [
            "*test_uses_the_training_fixture PASSED*",
            "*test_uses_it_through_another_fixture PASSED*",
            "*test_marked_by_hand PASSED*",
        ]
    )


def test_a_marker_nobody_declared_is_an_error(pytester):
    pytester.makepyprojecttoml(project_settings())
    pytester.makepyfile(test_typo="import pytest\n\n@pytest.mark.slwo\ndef test_x():\n    pass\n")
    result = pytester.runpytest("test_typo.py", "-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*'slwo' not found in `markers` configuration option*"])
