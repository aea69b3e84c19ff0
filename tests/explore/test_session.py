"""What the explorer's server answers, without a server: the numbers of the Python API for the
model's own translation, every bad request a one-line UserError, and nothing recomputed when only
a policy, a head or an already asked target token changes."""

import json
import re

import numpy as np
import pytest
import torch

import qkvmt
from qkvmt.alignment.policy import cross_signals
from qkvmt.analysis.forced import pair_ids
from qkvmt.analysis.signals import SIGNALS
from qkvmt.analysis.trace import KINDS
from qkvmt.errors import UserError
from qkvmt.explore import deletion, lazy_signals, session
from qkvmt.explore.session import Explorer
from qkvmt.pipeline.align import align
from qkvmt.studies.faithfulness.curves import FRACTIONS, cuts, forced_inputs
from qkvmt.text.metrics import sentence_scores
from tests.analysis.throwaway import PER_LAYER, SLOW, WHOLE, throwaway_signals
from tests.conftest import compose_inference
from tests.explore.conftest import REFERENCE, SOURCE

ATOL = 5e-5  # the page's JSON holds 4 decimals


def close(shown, expected):
    expected = np.asarray(expected, dtype=float)
    shown = np.asarray([np.nan if x is None else x for x in np.ravel(shown)], dtype=float).reshape(expected.shape)
    np.testing.assert_allclose(shown, np.where(np.isneginf(expected), np.nan, expected), atol=ATOL)


def test_a_sentence_shows_the_apis_translation_maps_scores_and_links(model, reverse_model):
    explorer = Explorer(model, reverse_model)  # its own: the shared one may hold the sentence with more signals
    shown = json.loads(json.dumps(explorer.sentence({"source": SOURCE, "reference": REFERENCE})))  # as sent
    attention = model.attention(SOURCE, signals=set(SIGNALS))
    assert shown["translation"] == attention.target == model.translate(SOURCE)[0]
    for kind, viewer in shown["attention"].items():  # the first view: the weights and ALTI+ only
        assert ["weights", *viewer.get("signals", {})] == [
            s for s in lazy_signals.FIRST if kind in attention.signal_maps[s]
        ]
        assert (viewer["rows"], viewer["cols"]) == (attention.map(kind).rows, attention.map(kind).cols)
    for signal in SIGNALS:  # every other signal when asked for, each kind it covers at once
        asked = (
            {}
            if signal in lazy_signals.FIRST
            else json.loads(json.dumps(explorer.signal({"source": SOURCE, "signal": signal})))
        )
        for kind in KINDS:
            if kind not in attention.signal_maps[signal]:
                assert kind not in asked
                continue
            expected = attention.map(kind, signal)
            viewer = shown["attention"][kind]
            drawn = (
                viewer
                if signal == "weights"
                else viewer["signals"][signal]
                if signal in lazy_signals.FIRST
                else asked[kind]
            )
            assert drawn["maps"] is None if expected.weights is None else close(drawn["maps"], expected.weights) is None
            close(drawn["layers"], expected.layers)
    assert [t["token"] for t in shown["token_scores"]] == attention.out_tokens
    close([t["prob"] for t in shown["token_scores"]], [t.prob for t in attention.token_scores])
    close(shown["source_share"], attention.contributions.source_share)
    (own,), signatures = sentence_scores([attention.target], [REFERENCE])
    assert shown["scores"]["signatures"] == signatures and own["chrf"] > 0
    assert {k: shown["scores"][k] for k in own} == pytest.approx(own, abs=ATOL)
    links = model.align(SOURCE)
    assert shown["alignment"]["pharaoh"] == links.pharaoh and shown["alignment"]["policy"] == links.policy
    close(shown["alignment"]["matrix"], links.word_matrix)
    assert shown["alignment"]["tgt_groups"] == links.tgt_word_groups


def test_the_page_and_a_sentence_list_every_registered_signal(model):
    with throwaway_signals():
        explorer = Explorer(model)
        choices = json.loads(re.search(r'id="data">(.*?)</script>', explorer.page(), re.S).group(1))["choices"]
        assert choices["signal"] == cross_signals() and {PER_LAYER, WHOLE, SLOW} <= set(choices["signal"])
        listed = json.loads(re.search(r'id="data">(.*?)</script>', explorer.page(), re.S).group(1))["signals"]
        assert {PER_LAYER, WHOLE, SLOW} <= set(listed["cross"]) and listed["cross"][WHOLE] == "probe, whole model"
        assert PER_LAYER in listed["encoder"] and WHOLE not in listed["encoder"]
        explorer.sentence({"source": SOURCE})
        cross = explorer.signal({"source": SOURCE, "signal": WHOLE})["cross"]
        assert cross["label"] == "probe, whole model" and cross["maps"] is None and len(cross["layers"]) == 1
        assert set(explorer.signal({"source": SOURCE, "signal": PER_LAYER})) == set(KINDS)
        for policy in ({"signal": WHOLE}, {"signal": PER_LAYER, "layer": 0}):
            links = explorer.align({"source": SOURCE, "policy": policy})
            assert links["pharaoh"] == model.align(SOURCE, policy=policy).pharaoh
        with pytest.raises(UserError, match=f"alignment.head=1: {PER_LAYER} has no per-head maps; use head=mean"):
            explorer.align({"source": SOURCE, "policy": {"signal": PER_LAYER, "head": 1}})


def test_a_full_context_model_is_forced_once_per_sentence(supervised_run, monkeypatch):
    model = qkvmt.load(supervised_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    assert model.meta.full_context_layer is not None
    passes = []
    forced = session.forced_attention
    monkeypatch.setattr(session, "forced_attention", lambda *a, **k: passes.append(a) or forced(*a, **k))
    explorer = Explorer(model)
    shown = explorer.sentence({"source": SOURCE})
    expected = model.align(SOURCE)
    assert len(passes) == 1 and expected.full_context_layer == model.meta.full_context_layer
    assert shown["alignment"]["pharaoh"] == expected.pharaoh
    close(shown["alignment"]["matrix"], expected.word_matrix)
    plain = model.attention(SOURCE)  # the maps shown are those of the pass that predicts
    close(shown["attention"]["cross"]["maps"], plain.cross)


def test_without_a_reference_there_are_no_scores(explorer):
    assert explorer.sentence({"source": SOURCE, "reference": "  "})["scores"] is None


def test_invisible_characters_are_read_as_nothing_and_a_reference_of_them_as_none(explorer):
    hidden = {"source": "\ufeff" + SOURCE.replace(" ", "\u200b ", 1), "reference": "\x00\u200b\u2060"}
    assert explorer.sentence(hidden) == explorer.sentence({"source": SOURCE})


def test_another_policy_gives_the_apis_links_without_a_new_forced_pass(explorer, model, monkeypatch):
    explorer.sentence({"source": SOURCE})
    passes = []
    monkeypatch.setattr(session, "forced_attention", lambda *a, **k: passes.append(a))
    monkeypatch.setattr(session, "inspect_head", lambda *a, **k: passes.append(a))
    for policy in (
        {"layer": 0, "head": 1},
        {"head": "mean", "rows": "reading", "signal": "value_norms"},
        {"layer": 1, "head": 3, "direction": "intersection", "signal": "alti"},
    ):
        shown = explorer.align({"source": SOURCE, "policy": policy})
        expected = model.align(SOURCE, policy=policy)
        assert shown["pharaoh"] == expected.pharaoh and shown["policy"] == expected.policy
        close(shown["matrix"], expected.word_matrix)
    assert passes == []  # the sentence's forced pass was kept


@pytest.mark.parametrize("kind,layer,head", [("cross", 1, 2), ("decoder", 0, 3), ("encoder", -1, 0)])
def test_a_heads_walk_for_one_query_is_the_apis_inspection(explorer, model, kind, layer, head):
    expected = model.inspect(SOURCE, kind=kind, layer=layer, head=head)
    row = 0 if kind == "decoder" else len(expected.query_tokens) - 1  # the decoder's first query sees one key
    shown = explorer.inspect({"source": SOURCE, "kind": kind, "layer": layer, "head": head, "row": row})
    q = shown["query"]
    assert (shown["layer"], shown["head"], q["token"]) == (expected.layer, expected.head, expected.query_tokens[row])
    assert shown["key_tokens"] == expected.key_tokens
    for name, value in (
        ("q", expected.q[row]),
        ("k", expected.k),
        ("v", expected.v),
        ("weights", expected.weights[row]),
        ("scores", expected.scores[row]),
        ("output", expected.output[row]),
        ("contributions", expected.contributions[row]),
    ):
        close(q[name], value)
    close(q["dots"], expected.k @ expected.q[row])
    close(shown["weights"], expected.weights)
    # the walk adds up: the scaled q·k are the scores, and the weighted values sum to the output
    seen = [j for j, score in enumerate(q["scores"]) if score is not None]
    assert len(seen) == (1 if kind == "decoder" else len(shown["key_tokens"]))  # None: a masked (future) key
    close(np.asarray(q["dots"])[seen] / np.sqrt(shown["d_k"]), [q["scores"][j] for j in seen])
    np.testing.assert_allclose(np.sum(q["weighted"], axis=0), q["output"], atol=1e-3)


def test_symmetrized_links_are_align_pys_with_the_reverse_model(explorer, trained_run, reverse_run, tmp_path):
    shown = explorer.sentence({"source": SOURCE})["symmetrized"]
    ckpts = [
        f"ckpt_path={trained_run['run'] / 'checkpoints' / 'last.ckpt'}",
        f"reverse_ckpt_path={reverse_run['run'] / 'checkpoints' / 'last.ckpt'}",
    ]
    align(compose_inference("align", *ckpts, f"sentence='{SOURCE}'", f"output_dir={tmp_path}"))
    written = json.loads((tmp_path / "alignment.json").read_text())
    for key in ("forward_links", "reverse_links", "links", "src_words", "tgt_words", "policies"):
        assert json.loads(json.dumps(shown[key])) == written[key], key
    assert shown["method"] == written["symmetrize"]


def test_a_target_tokens_deletion_curves_are_one_per_reading_and_delete_what_the_signal_ranks_first(
    explorer, model, monkeypatch
):
    attention = model.attention(SOURCE, signals=set(SIGNALS))
    row = len(attention.out_tokens) - 2  # the last subword before </s>
    shown = json.loads(json.dumps(explorer.curves({"source": SOURCE, "row": row})))  # as sent
    assert (shown["row"], shown["token"], shown["fractions"]) == (row, attention.out_tokens[row], list(FRACTIONS))
    src, tgt = pair_ids(model.tokenizer, SOURCE, model.forced(SOURCE, None))
    assert shown["ks"] == cuts(len(src), FRACTIONS)
    expected = []  # every cross signal's every layer, or its one map, labelled as the registry labels it
    for name in cross_signals():
        maps = attention.signal_maps[name]["cross"]
        label = SIGNALS[name].label
        expected += (
            [(name, None, label)]
            if maps.whole_model
            else [(name, i, f"{label}, layer {i}") for i in range(len(maps.layers))]
        )
    assert [(r["signal"], r["layer"], r["label"]) for r in shown["readings"]] == expected
    assert all(len(r["drops"]) == len(FRACTIONS) for r in shown["readings"]) and len(shown["random"]) == len(FRACTIONS)

    # by hand: the last layer's weights rank the source, the top k become <pad>, log p drops
    ranked = np.argsort(-attention.map("cross").layers[-1][row, : len(src)], kind="stable")
    m = model.transformer

    def log_p(ids):
        x = forced_inputs(m, ids, tgt)
        with torch.no_grad():
            return m(x.src, x.tgt_in)[0][0, row].log_softmax(-1)[x.tgt_out[0, row]].item()

    drops = [
        log_p(src) - log_p([m.cfg.pad_id if i in ranked[:k] else t for i, t in enumerate(src)]) for k in shown["ks"]
    ]
    weights = next(
        r for r in shown["readings"] if (r["signal"], r["layer"]) == ("weights", len(attention.map("cross").layers) - 1)
    )
    np.testing.assert_allclose(weights["drops"], drops, atol=1e-4)

    monkeypatch.setattr(deletion, "deletion_curves", lambda *a, **k: pytest.fail("asked twice, computed twice"))
    assert json.loads(json.dumps(explorer.curves({"source": SOURCE, "row": row}))) == shown


@pytest.mark.parametrize(
    "call,body,message",
    [
        ("sentence", [SOURCE], "must be a JSON object"),
        ("sentence", {}, "no source given"),
        ("sentence", {"source": " \n "}, "source is empty"),
        ("sentence", {"source": "\ufeff\u200b\x00"}, "source is empty"),
        ("sentence", {"source": 7}, "source: give text, not int"),
        ("sentence", {"source": SOURCE, "reference": ["x"]}, "reference: give text, not list"),
        ("sentence", {"source": SOURCE, "reference": "t9 \udfff"}, "reference is not valid UTF-8 text"),
        ("align", {"source": SOURCE, "policy": {"layer": 9}}, r"alignment.layer=9: the decoder has 2 layers"),
        ("align", {"source": SOURCE, "policy": "best"}, "policy: give an object"),
        ("sentence", {"source": SOURCE, "policy": {"nope": 1}}, "policy field 'nope': no such field"),
        ("inspect", {"source": SOURCE, "kind": "cross", "layer": 0, "row": 0}, "head=None: give a whole number"),
        (
            "inspect",
            {"source": SOURCE, "kind": "cross", "layer": 0, "head": 4, "row": 0},
            r"head=4: layers have 4 heads \(0..3\)",
        ),
        (
            "inspect",
            {"source": SOURCE, "kind": "cross", "layer": 2, "head": 0, "row": 0},
            r"layer=2: the cross has 2 layers",
        ),
        (
            "inspect",
            {"source": SOURCE, "kind": "cross", "layer": 0, "head": True, "row": 0},
            "head=True: give a whole number",
        ),
        ("inspect", {"source": SOURCE, "kind": "self", "layer": 0, "head": 0, "row": 0}, "kind='self': use one of"),
        (
            "inspect",
            {"source": SOURCE, "kind": "cross", "layer": 0, "head": 0, "row": 99},
            r"row=99: this cross attention has \d+ queries",
        ),
        ("curves", {"source": SOURCE}, "row=None: give a whole number"),
        ("curves", {"source": SOURCE, "row": "2"}, "row='2': give a whole number"),
        ("curves", {"source": SOURCE, "row": False}, "row=False: give a whole number"),
        ("curves", {"source": SOURCE, "row": 99}, r"row=99: the translation has \d+ target tokens \(rows 0\.\.\d+\)"),
        ("curves", {"source": SOURCE, "row": -1}, r"row=-1: the translation has \d+ target tokens"),
        ("curves", {"row": 0}, "no source given"),
    ],
)
def test_bad_requests_are_one_line_user_errors(explorer, call, body, message):
    with pytest.raises(UserError, match=message) as e:
        getattr(explorer, call)(body)
    assert "\n" not in str(e.value)


def test_text_beyond_the_models_positions_is_refused_not_cut(explorer, model):
    n = model.transformer.cfg.max_positions
    with pytest.raises(
        UserError, match=rf"the source has {n} subwords, but the model reads at most {n - 1} .*nothing is cut"
    ):
        explorer.sentence({"source": " ".join(["w1"] * n)})
    assert explorer.sentence({"source": " ".join(["w1"] * (n - 1))})["translation"] is not None  # the longest that fits


@pytest.mark.parametrize("signal", ["nope", None, 3, ["alti"]])
def test_a_signal_that_is_not_registered_is_a_one_line_error(explorer, signal):
    with pytest.raises(UserError, match=r"signal=.*: (use|give a signal's name,) one of weights, value_norms"):
        explorer.signal({"source": SOURCE, "signal": signal})
