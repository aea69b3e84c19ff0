"""The server's limits.* as the command reads them: each a whole number of at least 1, every one
given, no other; a mistake is one line naming the setting, before the model loads."""

import re

import pytest

from qkvmt.errors import UserError
from qkvmt.serve.requests import Limits, limits_of
from tests.commandline import run_script, user_error

GOOD = {"body_bytes": 4096, "sentences": 8, "characters": 300, "beam_size": 8, "head_seconds": 10}


def test_good_limits_are_read_as_given():
    assert limits_of(GOOD, "limits.") == Limits(**GOOD)


@pytest.mark.parametrize(
    "values,words",
    [
        (GOOD | {"foo": 3}, "limits.foo is no limit: the limits are limits.body_bytes, limits.sentences,"),
        (5, "limits=5: set the limits one by one: limits.body_bytes,"),
        ({k: v for k, v in GOOD.items() if k != "sentences"}, "limits.sentences is missing: give limits.sentences="),
        (GOOD | {"beam_size": True}, "limits.beam_size=true: give a whole number of at least 1"),
    ],
)
def test_a_bad_limit_is_an_error_naming_it(values, words):
    with pytest.raises(UserError, match=re.escape(words)):
        limits_of(values, "limits.")


@pytest.mark.parametrize(
    "override,words",
    [("+limits.foo=3", "limits.foo is no limit"), ("limits=5", "limits=5: set"), ("~limits.sentences", "missing")],
)
def test_the_command_refuses_bad_limits_in_one_line_before_loading_the_model(tmp_path, override, words):
    missing = tmp_path / "missing.ckpt"  # were the limits not checked first, the error would name this
    r = run_script("serve", f"ckpt_path={missing}", "port=0", override)
    assert user_error(r).startswith("error: limits") and words in user_error(r)
