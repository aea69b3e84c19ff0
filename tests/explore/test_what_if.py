"""The explorer's "what if" panel on the server side: an edit asked as JSON is Model.intervene's
answer for the same edit (with the explorer's decoding), swapping a key-value pair changes
nothing, every bad field is a one-line UserError (a JSON 400 over HTTP, after which the server
keeps serving), and the choices the page offers are the edits' own."""

import json
import re

import numpy as np
import pytest

import qkvmt
from qkvmt.analysis import intervention
from qkvmt.analysis.edits import PARTS, edits_of
from qkvmt.analysis.trace import KINDS
from qkvmt.errors import UserError
from qkvmt.explore import what_if
from qkvmt.explore.session import Explorer
from qkvmt.results.intervention import describe
from tests.explore.conftest import SOURCE
from tests.explore.test_app import client_of

ATOL = 5e-5  # the JSON holds 4 decimals


def asked(explorer, **fields) -> dict:
    return json.loads(json.dumps(explorer.intervene({"source": SOURCE} | fields)))  # as sent


def same(shown: dict, expected) -> None:
    """The explorer's answer is `expected` (a Model.intervene result), field by field."""
    assert shown["source"] == expected.source and shown["src_tokens"] == expected.src_tokens
    assert (shown["original"], shown["edited"]) == (expected.original, expected.edited)
    assert shown["edited_words"] == expected.edited.split() and shown["changed"] == expected.changed
    assert shown["changed_words"] == [w for w, c in zip(expected.edited.split(), expected.changed) if c]
    assert shown["original_tokens"] == expected.original_tokens
    assert shown["edit"] == json.loads(json.dumps(describe(expected.edits[0])))
    np.testing.assert_allclose(shown["log_prob"], expected.log_prob, atol=ATOL)
    np.testing.assert_allclose(shown["log_prob_edited"], expected.log_prob_edited, atol=ATOL)
    assert shown["log_prob_change"] == pytest.approx(expected.log_prob_change.sum(), abs=ATOL)
    assert shown["log_prob_total"] == pytest.approx(expected.log_prob.sum(), abs=ATOL)
    assert shown["log_prob_edited_total"] == pytest.approx(expected.log_prob_edited.sum(), abs=ATOL)


@pytest.mark.parametrize(
    "fields,edit",
    [
        ({"edit": "swap", "what": "keys", "kind": "cross", "a": 0, "b": 3}, qkvmt.Swap(0, 3, "keys")),
        (
            {"edit": "swap", "what": "values", "kind": "encoder", "layer": 1, "a": 4, "b": 1},
            qkvmt.Swap(4, 1, "values", kind="encoder", layers=(1,)),
        ),
        (
            {"edit": "zero", "what": "output", "kind": "cross", "layer": 0, "head": 2},
            qkvmt.Zero("output", kind="cross", layers=(0,), heads=(2,)),
        ),
        (
            {"edit": "zero", "what": "output", "kind": "decoder", "head": 1},
            qkvmt.Zero("output", kind="decoder", heads=(1,)),
        ),
    ],
)
def test_an_edit_is_answered_as_model_intervene_answers_it(explorer, model, fields, edit):
    same(asked(explorer, **fields), model.intervene(SOURCE, edit))


def test_the_explorers_decoding_settings_decode_both_translations(model):
    explorer = Explorer(model, decode={"beam_size": 1, "max_len_b": 3})
    shown = asked(explorer, edit="swap", what="keys", kind="cross", a=1, b=2)
    same(shown, model.intervene(SOURCE, qkvmt.Swap(1, 2, "keys"), beam_size=1, max_len_b=3))
    assert shown["original"] == model.translate(SOURCE, beam_size=1, max_len_b=3)[0]


def test_swapping_both_keys_and_values_leaves_the_translation_as_it_was(explorer, model):
    shown = asked(explorer, edit="swap", what="both", kind="cross", a=0, b=4)
    assert shown["edited"] == shown["original"] == model.translate(SOURCE)[0]
    assert not any(shown["changed"]) and shown["changed_words"] == []
    assert abs(shown["log_prob_change"]) < 1e-3


def test_an_edit_asked_again_is_not_computed_again(explorer, model, monkeypatch):
    fields = {"edit": "zero", "what": "output", "kind": "encoder", "layer": 0, "head": 0}
    first = asked(explorer, **fields)
    monkeypatch.setattr(model, "intervene", lambda *a, **k: pytest.fail("asked twice, computed twice"))
    assert asked(explorer, **fields) == first


def test_the_sentences_translation_is_not_searched_again(explorer, model, monkeypatch):
    """Only the edited translation is a new search: the original is the sentence the page shows."""
    explorer.sentence({"source": SOURCE})
    searched = []
    search = intervention.translate_ids
    monkeypatch.setattr(intervention, "translate_ids", lambda *a, **k: searched.append(a[2]) or search(*a, **k))
    shown = asked(explorer, edit="swap", what="keys", kind="cross", a=0, b=2)
    assert searched == [[SOURCE]]
    same(shown, model.intervene(SOURCE, qkvmt.Swap(0, 2, "keys")))
    assert len(searched) == 3  # Model.intervene alone searches the original too


def test_the_page_offers_the_edits_parts_and_kinds_and_asks_the_intervene_endpoint(explorer):
    data = json.loads(re.search(r'id="data">(.*?)</script>', explorer.page(), re.S).group(1))
    assert data["api"]["intervene"] == "api/intervene"
    offered = data["what_if"]
    assert offered == what_if.choices() and set(offered) == set(what_if.EDITS)
    assert offered["swap"]["what"] == list(PARTS) and set(offered["zero"]["kind"]) == set(KINDS)
    assert 'id="what-if"' in explorer.page()


SWAP = {"source": SOURCE, "edit": "swap", "what": "keys", "kind": "cross", "a": 0, "b": 1}
ZERO = {"source": SOURCE, "edit": "zero", "what": "output", "kind": "cross", "head": 0}


@pytest.mark.parametrize(
    "body,message",
    [
        ([SOURCE], "must be a JSON object"),
        ({"edit": "swap"}, "no source given"),
        (SWAP | {"source": 3}, "source: give text, not int"),
        (SWAP | {"edit": "delete"}, "edit='delete': use one of swap, zero"),
        (SWAP | {"edit": ["swap"]}, r"edit=\['swap'\]: use one of swap, zero"),
        (SWAP | {"edit": None}, "edit=None: use one of swap, zero"),
        (SWAP | {"what": "queries"}, "what='queries': use one of keys, values, both"),
        (ZERO | {"what": "keys"}, "what='keys': use one of output"),
        (SWAP | {"kind": "decoder"}, "kind='decoder': use one of cross, encoder"),
        (SWAP | {"kind": 1}, "kind=1: use one of cross, encoder"),
        (SWAP | {"a": None}, r"swap needs two source tokens, a and b: pick two"),
        ({k: v for k, v in SWAP.items() if k not in ("a", "b")}, "swap needs two source tokens"),
        (SWAP | {"b": 99}, r"^Swap.b=99 does not exist: the source tokens are 0\.\.\d+ \(or -\d+\.\.-1 from the end"),
        (SWAP | {"a": -99}, r"^Swap.a=-99 does not exist: the source tokens are 0\.\."),
        (SWAP | {"a": "0"}, r"^Swap.a='0': give a whole number$"),
        (SWAP | {"a": True}, r"^Swap.a=true: give a whole number$"),
        (SWAP | {"a": 1.0}, r"^Swap.a=1.0: give a whole number$"),
        (SWAP | {"b": 0}, r"^Swap.a=Swap.b=0: pick two different source tokens to swap$"),
        (SWAP | {"layer": 2}, r"^Swap.layers=2 does not exist: the cross attention's layers are 0\.\.1"),
        (SWAP | {"layer": "all"}, r"^Swap.layers='all': give a whole number or a list of whole numbers"),
        (SWAP | {"layer": 0.5}, r"^Swap.layers=0.5: give a whole number or a list of whole numbers"),
        (SWAP | {"head": 4}, r"^Swap.heads=4 does not exist: the heads are 0\.\.3"),
        (ZERO | {"head": None}, r"^zero needs a head: pick one"),
        (ZERO | {"head": "mean"}, r"^Zero.heads='mean': give a whole number or a list of whole numbers"),
        (ZERO | {"a": 1}, "a: zero edits a head, not source tokens; leave a and b out"),
        (SWAP | {"heads": [0]}, "unknown field 'heads': a what-if request has source, edit, what, kind"),
        ({"source": " ".join(["w1"] * 300)} | {k: v for k, v in SWAP.items() if k != "source"}, "nothing is cut"),
    ],
)
def test_bad_fields_are_one_line_user_errors(explorer, body, message):
    with pytest.raises(UserError, match=message) as e:
        explorer.intervene(body)
    assert "\n" not in str(e.value)


def test_over_http_a_bad_request_is_a_json_error_and_a_good_one_is_then_answered(explorer, model):
    client = client_of(explorer)
    r = client.post("/api/intervene", json=SWAP | {"b": 42})
    assert r.status_code == 400 and "Swap.b=42 does not exist" in r.json()["error"]
    r = client.post("/api/intervene", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]
    ok = client.post("/api/intervene", json=SWAP)
    assert ok.status_code == 200
    same(ok.json(), model.intervene(SOURCE, qkvmt.Swap(0, 1, "keys")))


@pytest.mark.parametrize(
    "fields, edit",
    [
        ({"a": 3, "b": 3}, {"a": 3, "b": 3}),
        ({"a": 1.5}, {"a": 1.5}),
        ({"layer": "12"}, {"layers": "12"}),
        ({"b": 99}, {"b": 99}),
        ({"a": -1, "b": 99}, {"a": -1, "b": 99}),
        ({"head": 9}, {"heads": 9}),
    ],
)
def test_the_page_and_the_command_refuse_an_edit_in_the_same_words(explorer, model, fields, edit):
    """One parser and one set of checks: a request and the same edit written for `qkvmt intervene`."""
    with pytest.raises(UserError) as by_page:
        explorer.intervene(SWAP | fields)
    with pytest.raises(UserError) as by_command:
        written = {k: v for k, v in SWAP.items() if k in ("what", "kind", "a", "b")} | edit
        model.intervene(SOURCE, *edits_of([{"swap": written}]))
    assert str(by_page.value) == str(by_command.value)


def test_a_swap_of_the_last_token_with_itself_by_a_negative_position_is_refused(explorer):
    n = len(explorer.intervene(SWAP)["src_tokens"])
    with pytest.raises(UserError, match=rf"^Swap\.a={n - 1} and Swap\.b=-1 are the same source token"):
        explorer.intervene(SWAP | {"a": n - 1, "b": -1})
