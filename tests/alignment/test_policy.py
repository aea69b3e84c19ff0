"""Known answers for link extraction: rows (predicting vs reading), direction, head, layer."""

import numpy as np
import pytest

from qkvmt.alignment.policy import AlignmentPolicy, cross_signals, directed_links
from qkvmt.analysis.forced import AttentionMap
from qkvmt.analysis.signals import SIGNALS
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta
from tests.analysis.throwaway import PER_LAYER, WHOLE, throwaway_signals

# One layer, two heads; a forced pass over <s> y1 y2 with source x1 x2 </s>.
# Head 0 row t reads token t (<s>, y1, y2) and predicts token t+1 (y1, y2, </s>).
HEAD0 = [
    [0.1, 0.8, 0.1],  # reads <s>, predicts y1: looks at x2
    [0.7, 0.2, 0.1],  # reads y1, predicts y2: looks at x1
    [0.2, 0.3, 0.5],  # reads y2, predicts </s>: mostly </s>, then x2
]
HEAD1 = [[0.9, 0.05, 0.05]] * 3  # always x1
CROSS = AttentionMap(
    "cross", np.array([[HEAD0, HEAD1]]), ["y1", "y2", "</s>"], ["x1", "x2", "</s>"]
)  # (L=1, H=2, T=3, S=3)
TGT_GROUPS = [[0], [1]]  # y1, y2 as output tokens (</s> belongs to no word)
SRC_GROUPS = [[0], [1]]  # x1, x2


def test_predicting_rows_link_each_word_to_what_predicts_it():
    assert AlignmentPolicy(0, 0, "predicting").links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(1, 0), (0, 1)}


def test_reading_rows_are_one_step_later_shift_att():
    # y1 is read by row 1 (-> x1), y2 by row 2 (-> x2, since </s> never links)
    assert AlignmentPolicy(0, 0, "reading").links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(0, 0), (1, 1)}


def test_head_mean_averages_the_heads_and_a_head_index_picks_one():
    np.testing.assert_allclose(AlignmentPolicy(0, "mean").head_weights(CROSS), (np.array(HEAD0) + HEAD1) / 2)
    assert AlignmentPolicy(0, 1).links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(0, 0), (0, 1)}


def test_directions_on_a_hand_built_word_matrix():
    m = np.array([[0.6, 0.3, 0.1], [0.5, 0.1, 0.4]])  # 2 target words × 3 source words
    assert directed_links(m, "target_to_source") == {(0, 0), (0, 1)}
    assert directed_links(m, "source_to_target") == {(0, 0), (1, 0), (2, 1)}
    assert directed_links(m, "intersection") == {(0, 0)}


def test_validated_normalises_the_layer_and_reads_the_head():
    assert AlignmentPolicy.validated(-1, "mean", "reading", "intersection", 3, 4) == AlignmentPolicy(
        2, "mean", "reading", "intersection"
    )
    assert AlignmentPolicy.validated(1, "2", "predicting", "target_to_source", 3, 4).head == 2


@pytest.mark.parametrize(
    "layer, head, rows, direction, named",
    [
        (3, 0, "predicting", "target_to_source", "alignment.layer=3"),
        (-4, 0, "predicting", "target_to_source", "alignment.layer=-4"),
        (0, 4, "predicting", "target_to_source", "alignment.head=4"),
        (0, "max", "predicting", "target_to_source", "alignment.head=max"),
        (0, 0, "writing", "target_to_source", "alignment.rows='writing'"),
        (0, 0, "predicting", "both", "alignment.direction='both'"),
    ],
)
def test_bad_settings_are_user_errors_naming_the_setting(layer, head, rows, direction, named):
    with pytest.raises(UserError, match=named.replace("(", r"\(")):
        AlignmentPolicy.validated(layer, head, rows, direction, 3, 4)


def meta(**changes):
    return CheckpointMeta(model_config={}, tokenizer="", src_lang="de", tgt_lang="en", **changes)


def test_without_supervision_the_default_is_the_penultimate_layers_average_or_a_single_layers_own():
    assert AlignmentPolicy.default_for(meta(), n_layers=3, n_heads=4) == AlignmentPolicy(1, "mean")
    assert AlignmentPolicy.default_for(meta(), n_layers=1, n_heads=4) == AlignmentPolicy(0, "mean")


def test_a_supervised_head_is_read_in_both_directions_by_default_and_one_way_for_symmetrizing():
    supervised = meta(alignment={"layer": 0, "head": 1, "full_context": True})
    assert supervised.full_context_layer == 0 and meta().full_context_layer is None
    default = AlignmentPolicy.default_for(supervised, n_layers=1, n_heads=2)
    assert default == AlignmentPolicy(0, 1, "predicting", "intersection")
    assert default.one_way() == AlignmentPolicy(0, 1, "predicting", "target_to_source")
    # head 1 always looks at x1: y1 and y2 both link to it one way, only y1 both ways
    assert default.one_way().links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(0, 0), (0, 1)}
    assert default.links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(0, 0)}


def test_a_policy_reads_the_map_of_its_signal_and_the_layer_as_a_whole_for_mean():
    # Value norms: head 1 puts all its weight on x1 but its values there are tiny; the layer as a
    # whole (the heads' summed vectors) then sides with head 0, which the head average would not.
    norms = AttentionMap(
        "cross",
        np.array([[HEAD0, np.array(HEAD1) * 0.01]]),
        CROSS.rows,
        CROSS.cols,
        "value_norms",
        layer_maps=np.array([HEAD0]),
    )
    policy = AlignmentPolicy(0, "mean", signal="value_norms")
    assert policy.links(norms, TGT_GROUPS, SRC_GROUPS) == AlignmentPolicy(0, 0).links(CROSS, TGT_GROUPS, SRC_GROUPS)
    assert AlignmentPolicy(0, "mean").links(CROSS, TGT_GROUPS, SRC_GROUPS) == {(0, 0), (0, 1)}  # weights: x1 wins
    with pytest.raises(ValueError, match="reading value_norms was given a map of weights"):
        policy.links(CROSS, TGT_GROUPS, SRC_GROUPS)
    with pytest.raises(UserError, match=r"alignment.signal='alti2': use one of weights, value_norms"):
        AlignmentPolicy.validated(0, 0, "predicting", "intersection", 1, 2, signal="alti2")


def test_a_policy_reads_any_registered_signal_of_cross_attention():
    with throwaway_signals():
        assert cross_signals() == [name for name, s in SIGNALS.items() if "cross" in s.kinds]
        assert {PER_LAYER, WHOLE, "weights", "value_norms", "alti"} <= set(cross_signals())
        assert AlignmentPolicy.validated(0, "mean", "predicting", "intersection", 1, 2, signal=WHOLE).signal == WHOLE
        # One map per layer and none per head: the layer is read; a head is refused, saying what to give.
        layers = AttentionMap("cross", None, CROSS.rows, CROSS.cols, PER_LAYER, layer_maps=np.array([HEAD0, HEAD1]))
        assert AlignmentPolicy(1, "mean", signal=PER_LAYER).links(layers, TGT_GROUPS, SRC_GROUPS) == {(0, 0), (0, 1)}
        assert AlignmentPolicy(0, "mean", signal=PER_LAYER).links(layers, TGT_GROUPS, SRC_GROUPS) == {(1, 0), (0, 1)}
        with pytest.raises(UserError, match=f"alignment.head=1: {PER_LAYER} has no per-head maps; use head=mean"):
            AlignmentPolicy(0, 1, signal=PER_LAYER).links(layers, TGT_GROUPS, SRC_GROUPS)
        # A signal of the whole model has one map, read whatever the layer (the default policy's, say).
        whole = AttentionMap("cross", None, CROSS.rows, CROSS.cols, WHOLE, layer_maps=np.array([HEAD0]))
        for layer in (0, 2):
            assert AlignmentPolicy(layer, "mean", signal=WHOLE).links(whole, TGT_GROUPS, SRC_GROUPS) == {(1, 0), (0, 1)}
    with pytest.raises(UserError, match=f"alignment.signal='{WHOLE}': use one of weights, value_norms"):
        AlignmentPolicy.validated(0, 0, "predicting", "intersection", 1, 2, signal=WHOLE)  # unregistered again


def test_only_signals_with_cross_attention_maps_make_links():
    from qkvmt.analysis.signals import Signal, register

    register(Signal("probe_encoder", "probe, encoder only", ("encoder",), lambda context: {}))
    try:
        assert "probe_encoder" not in cross_signals()
        with pytest.raises(UserError, match="alignment.signal='probe_encoder': use one of"):
            AlignmentPolicy.validated(0, 0, "predicting", "intersection", 1, 2, signal="probe_encoder")
    finally:
        SIGNALS.pop("probe_encoder")


def sink_free_words(w: np.ndarray, cols: list[str], sinks: set[str], tgt_groups, src_groups) -> np.ndarray:
    """The reference: (T, S) weights with the columns named in `sinks` set to 0 and each row
    scaled back to its total, then summed over a source word's pieces and averaged over a target
    word's, by loops."""
    out = np.zeros((len(tgt_groups), len(src_groups)))
    for j, rows in enumerate(tgt_groups):
        for t in rows:
            kept = {s: w[t, s] for s in range(len(cols)) if cols[s] not in sinks}
            scale = w[t].sum() / sum(kept.values())
            for i, pieces in enumerate(src_groups):
                out[j, i] += sum(kept.get(s, 0.0) * scale for s in pieces) / len(rows)
    return out


# Source "a b , c." (the comma a word of its own, the full stop a piece of "c."), target "x yz".
SINK_COLS = ["▁a", "▁b", "▁,", "▁c", ".", "</s>"]
SINK_SRC_GROUPS = [[0], [1], [2], [3, 4]]
SINK_ROWS = ["▁x", "▁y", "z", "</s>"]
SINK_TGT_GROUPS = [[0], [1, 2]]
SINK_CROSS = AttentionMap(
    "cross", np.random.default_rng(3).dirichlet(np.ones(6) * 0.5, size=(2, 3, 4)), SINK_ROWS, SINK_COLS
)  # (L=2, H=3, T=4, S=6)


@pytest.mark.parametrize("head", [0, 2, "mean"])
def test_a_policy_without_the_sinks_reads_the_renormalized_weights_of_the_other_columns(head):
    policy = AlignmentPolicy(1, head, direction="source_to_target", drop=("</s>", "punctuation"))
    w = SINK_CROSS.layers[1] if head == "mean" else SINK_CROSS.weights[1, head]
    want = sink_free_words(w, SINK_COLS, {"▁,", ".", "</s>"}, SINK_TGT_GROUPS, SINK_SRC_GROUPS)
    got = policy.word_matrix(SINK_CROSS, SINK_TGT_GROUPS, SINK_SRC_GROUPS)
    np.testing.assert_allclose(got, want)
    assert not got[:, 2].any()  # the comma, punctuation alone, takes nothing: no target word links to it
    by_source = {(int(np.argmax(want[:, i])), i) for i in range(4) if want[:, i].any()}
    assert policy.links(SINK_CROSS, SINK_TGT_GROUPS, SINK_SRC_GROUPS) == {(i, j) for j, i in by_source}


def test_drop_is_validated_and_serialized_and_a_policy_without_it_reads_every_column():
    policy = AlignmentPolicy.validated(0, "mean", "predicting", "intersection", 1, 2, drop=["</s>", "punctuation"])
    assert policy.drop == ("</s>", "punctuation") and policy.to_dict()["drop"] == ["</s>", "punctuation"]
    assert "drop" not in AlignmentPolicy.validated(0, "mean", "predicting", "intersection", 1, 2).to_dict()  # as before
    plain = AlignmentPolicy(1, "mean").word_matrix(SINK_CROSS, SINK_TGT_GROUPS, SINK_SRC_GROUPS)
    np.testing.assert_allclose(
        plain, sink_free_words(SINK_CROSS.layers[1], SINK_COLS, set(), SINK_TGT_GROUPS, SINK_SRC_GROUPS)
    )
    with pytest.raises(UserError, match=r"alignment.drop=\['', 'punctuation'\]: name tokens to leave out"):
        AlignmentPolicy.validated(0, 0, "predicting", "intersection", 1, 2, drop=["", "punctuation"])
