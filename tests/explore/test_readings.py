"""What the explorer answers of two other readings of attention, against the Python API on a real
sentence of the bundled de->en model: every cross map also without its sinks (`</s>` and
punctuation, each row renormalized), as `map("cross", signal, drop=SINKS)` gives it, and with a
reference, the maps of the pass forced on it, as `model.attention(source, reference)` gives them.
A signed map is not renormalized, and the answer says why; bad references are one-line errors."""

import json

import pytest

from qkvmt.analysis.trace import KINDS
from qkvmt.errors import UserError
from qkvmt.explore import lazy_signals, session
from qkvmt.explore.session import Explorer
from qkvmt.text.sinks import SINKS
from tests.analysis.throwaway import SIGNED, signed_signal
from tests.explore.test_session import close

SOURCE = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."
REFERENCE = "A man in an orange hat staring."
ASKED = ("value_norms", "input_x_gradient")  # computed when asked: per head, and a gradient of the whole model


def sent(answer: dict) -> dict:
    return json.loads(json.dumps(answer))  # as the server sends it


def check_reading(viewer: dict, expected, signals) -> None:
    """Every map the page holds of one pass (`viewer`, {kind: ...}) is the API's, its cross maps
    also without their sinks, each labelled as the API labels it."""
    for kind in KINDS:
        shown = viewer[kind]
        assert (shown["rows"], shown["cols"]) == (expected.map(kind).rows, expected.map(kind).cols)
        for signal in signals:
            if kind not in expected.signal_maps[signal]:
                continue
            drawn = shown if signal == "weights" else shown["signals"][signal]
            whole = expected.map(kind, signal)
            assert drawn["maps"] is None if whole.weights is None else close(drawn["maps"], whole.weights) is None
            close(drawn["layers"], whole.layers)
            if kind != "cross":
                assert "without" not in drawn
                continue
            cut = expected.map(kind, signal, drop=SINKS)
            without = drawn["without"]
            assert without["label"] == cut.signal_label and without["cols"] == cut.cols
            assert [whole.cols[i] for i in without["kept"]] == cut.cols and len(cut.cols) < len(whole.cols)
            assert without["maps"] is None if cut.weights is None else close(without["maps"], cut.weights) is None
            close(without["layers"], cut.layers)
    assert viewer["cross"]["sinks"] == "without </s> and punctuation (renormalized)"


def test_the_translations_maps_and_the_references_come_also_without_their_sinks_as_the_api_gives_them(bundled):
    explorer = Explorer(bundled)
    shown = sent(explorer.sentence({"source": SOURCE, "reference": REFERENCE}))
    own, forced = bundled.attention(SOURCE), bundled.attention(SOURCE, REFERENCE)
    assert shown["translation"] == own.target and own.target != REFERENCE
    assert shown["reference_attention"]["cross"]["rows"] == forced.out_tokens != own.out_tokens
    for reference, reading in ((None, shown["attention"]), (REFERENCE, shown["reference_attention"])):
        check_reading(reading, own if reference is None else forced, lazy_signals.FIRST)
        expected = bundled.attention(SOURCE, reference, signals=ASKED)
        for name in ASKED:  # computed when chosen, for the pass the page shows
            answer = sent(explorer.signal({"source": SOURCE, "signal": name, "reference": reference}))
            assert set(answer) == set(expected.signal_maps[name])
            for kind, maps in answer.items():
                reading[kind].setdefault("signals", {})[name] = maps
        check_reading(reading, expected, ASKED)


def test_a_reference_is_forced_once_and_kept_with_its_sentence(bundled, monkeypatch):
    explorer = Explorer(bundled)
    explorer.sentence({"source": SOURCE, "reference": REFERENCE})
    passes = []
    monkeypatch.setattr(session, "forced_attention", lambda *a, **k: passes.append(a))
    again = sent(explorer.sentence({"source": SOURCE, "reference": REFERENCE}))
    assert passes == []
    assert again["reference_attention"]["cross"]["rows"] == bundled.attention(SOURCE, REFERENCE).out_tokens
    assert sent(explorer.sentence({"source": SOURCE}))["reference_attention"] is None


def test_a_signed_map_is_not_renormalized_and_says_why(bundled):
    with signed_signal():
        explorer = Explorer(bundled)
        explorer.sentence({"source": SOURCE})
        cross = explorer.signal({"source": SOURCE, "signal": SIGNED})["cross"]
        refused = "only maps of shares (no negative values) can be renormalized without some columns"
        assert cross["without"] == {"refused": refused}
        expected = bundled.attention(SOURCE, signals={SIGNED}).map("cross", SIGNED)
        assert expected.layers.min() < 0
        close(cross["layers"], expected.layers)


@pytest.mark.parametrize(
    "call,body,message",
    [
        ("sentence", {"source": SOURCE, "reference": 7}, "reference: give text, not int"),
        ("sentence", {"source": SOURCE, "reference": {"text": REFERENCE}}, "reference: give text, not dict"),
        ("signal", {"source": SOURCE, "signal": "alti", "reference": ["x"]}, "reference: give text, not list"),
        ("signal", {"source": SOURCE, "signal": "nope", "reference": REFERENCE}, "signal='nope': use one of"),
    ],
)
def test_bad_references_are_one_line_user_errors(bundled, call, body, message):
    with pytest.raises(UserError, match=message) as e:
        getattr(Explorer(bundled), call)(body)
    assert "\n" not in str(e.value)


def test_a_reference_beyond_the_models_positions_is_refused_not_cut(bundled):
    explorer, n = Explorer(bundled), bundled.transformer.cfg.max_positions
    words = " ".join(["man"] * n)
    with pytest.raises(UserError, match=rf"the reference has {n} subwords, but the model reads at most {n - 1}"):
        explorer.sentence({"source": SOURCE, "reference": words})
    assert explorer.sentence({"source": SOURCE, "reference": REFERENCE})["reference_attention"] is not None
