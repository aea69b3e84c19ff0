"""The forced pass: one trace per sentence, the signals asked for (by default every one of about a
pass, the registry's) read back as maps with one row convention, and a full-context layer read
for alignment from the same pass."""

import math

import numpy as np
import pytest
import torch

import qkvmt
import qkvmt.analysis.forced as forced_module
from qkvmt.analysis.forced import KINDS, AttentionMap, forced_attention, one_pass_signals
from qkvmt.analysis.signals import SIGNALS
from qkvmt.errors import UserError
from qkvmt.loading import load_model
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import WeightRequest
from qkvmt.text.tokenizer import encode
from tests.analysis.throwaway import PER_LAYER, SLOW, WHOLE, throwaway_signals

SOURCE, TARGET = "w1 w2 w3", "t4 t3 t2"


@pytest.fixture(scope="module")
def loaded(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    return model, tok


@pytest.fixture
def traces(monkeypatch):
    """Counts the traced passes a forced pass runs."""
    seen = []

    def counted(*args, **kwargs):
        seen.append(args)
        return trace(*args, **kwargs)

    trace = forced_module.trace
    monkeypatch.setattr(forced_module, "trace", counted)
    return seen


def test_decoder_rows_are_named_by_the_token_they_predict(loaded):
    model, tok = loaded
    sa = forced_attention(model, tok, "w1  w2 w3 ", TARGET)
    ids = encode(tok, [TARGET])[0]
    names = [tok.id_to_token(i) for i in ids]
    assert sa.out_tokens == names + ["</s>"] and sa.tgt_tokens == ["<s>"] + names
    assert sa.src_tokens == [tok.id_to_token(i) for i in encode(tok, [SOURCE])[0]] + ["</s>"]
    maps = {m.kind: m for m in sa.maps()}
    assert list(maps) == list(KINDS)
    assert (maps["cross"].rows, maps["cross"].cols) == (sa.out_tokens, sa.src_tokens)
    assert (maps["decoder"].rows, maps["decoder"].cols) == (sa.out_tokens, sa.tgt_tokens)
    assert (maps["encoder"].rows, maps["encoder"].cols) == (sa.src_tokens, sa.src_tokens)
    # Causality pins the convention: the row predicting y_1 sees only <s>.
    assert np.allclose(maps["decoder"].weights[:, :, 0, 1:], 0) and np.allclose(maps["decoder"].weights[:, :, 0, 0], 1)


def test_a_map_refuses_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="2 row and 3 column labels"):
        AttentionMap("cross", np.zeros((1, 1, 3, 3)), ["a", "b"], ["x", "y", "z"])
    with pytest.raises(ValueError, match="2 row and 3 column labels"):  # a map without heads: its layers
        AttentionMap("cross", None, ["a", "b"], ["x", "y", "z"], WHOLE, np.zeros((1, 3, 3)))


def test_value_norms_are_the_weights_scaled_by_what_each_value_adds(loaded):
    model, tok = loaded
    sa = forced_attention(model, tok, SOURCE, TARGET)
    assert sa.signals == [name for name in SIGNALS if name in one_pass_signals()]  # every signal of one pass, in order
    for kind in KINDS:
        w, vn = sa.map(kind), sa.map(kind, "value_norms")
        assert vn.weights.shape == w.weights.shape and vn.layers.shape == (w.weights.shape[0], *w.weights.shape[2:])
        assert (vn.rows, vn.cols, vn.signal) == (w.rows, w.cols, "value_norms")
        # ‖α W_O v‖ = α ‖W_O v‖: zero exactly where the weight is (the decoder's future keys), and
        # one factor per key, shared by every query of a head
        assert ((vn.weights == 0) == (w.weights == 0)).all()
        ratio = vn.weights / np.where(w.weights > 0, w.weights, np.nan)
        np.testing.assert_allclose(np.nanmax(ratio, axis=2), np.nanmin(ratio, axis=2), rtol=1e-4)
    with pytest.raises(ValueError, match=r"no 'alti' maps of encoder attention here: .*alti \(cross\)"):
        sa.map("encoder", "alti")  # ALTI+ is about what reaches the predictions: cross only
    assert [m.kind for m in sa.maps("alti")] == ["cross"]
    np.testing.assert_array_equal(sa.contributions.source, sa.map("cross", "alti").layers)  # ALTI+ whole, kept


def test_one_trace_gives_every_registered_signal_asked_for(loaded, traces):
    model, tok = loaded
    with throwaway_signals() as slow_calls:
        sa = forced_attention(model, tok, SOURCE, TARGET)
        assert len(traces) == 1 and PER_LAYER in sa.signals and WHOLE in sa.signals
        assert SLOW not in sa.signals and not slow_calls  # many passes: only when named
        for kind in KINDS:
            m = sa.map(kind, PER_LAYER)
            assert m.weights is None and m.signal_label == "probe, per layer"
            np.testing.assert_array_equal(m.layers, 2 * sa.map(kind).layers)
        whole = sa.map("cross", WHOLE)
        assert whole.weights is None and whole.layers.shape == (1, len(sa.out_tokens), len(sa.src_tokens))
        np.testing.assert_array_equal(whole.layers[0], sa.map("cross").layers[-1])
        assert [m.kind for m in sa.maps(WHOLE)] == ["cross"]
        with pytest.raises(ValueError, match=f"no '{WHOLE}' maps of decoder attention"):
            sa.map("decoder", WHOLE)
        named = forced_attention(model, tok, SOURCE, TARGET, analyses={SLOW})
        assert named.signals == ["weights", SLOW] and len(slow_calls) == 1 and len(traces) == 2
    assert SLOW not in SIGNALS  # unregistered after the test
    only = forced_attention(model, tok, SOURCE, TARGET, analyses={"weights"})
    assert only.signals == ["weights"] and only.contributions is None
    np.testing.assert_array_equal(only.cross, sa.cross)
    with pytest.raises(UserError, match="signals=alti2, nope: no such signal; use some of weights, value_norms"):
        forced_attention(model, tok, SOURCE, TARGET, analyses={"alti2", "nope"})


def test_a_full_context_layer_is_read_from_the_pass_with_its_mask_edited(loaded, traces):
    model, tok = loaded
    with throwaway_signals():
        plain = forced_attention(model, tok, SOURCE, TARGET)
        both = forced_attention(model, tok, SOURCE, TARGET, full_context_layer=1)
    assert len(traces) == 3  # plain's; both's and its twin with the decoder's self-attention masks edited
    assert plain.for_alignment is plain and both.full_context_layer == 1
    for name in both.signals:  # the pass that predicts is the same with or without the full-context reading
        for kind, maps in both.signal_maps[name].items():
            for part in ("heads", "layers"):
                np.testing.assert_array_equal(getattr(maps, part), getattr(plain.signal_maps[name][kind], part))
    read = both.for_alignment
    x = build_inputs(
        [encode(tok, [SOURCE])[0]], [encode(tok, [TARGET])[0]], model.cfg.specials, model.cfg.max_positions
    )
    with torch.no_grad():
        memory, src_mask, _ = model.encode(x.src)
        read_1 = WeightRequest(cross=(1,))  # decode without the causal mask, as supervision reads the head
        full = model.decode(x.tgt_in, memory, src_mask, need_weights=read_1, self_mask=model.target_mask(x.tgt_in))
        full = full[2][1][0].numpy()
    np.testing.assert_allclose(read.cross[1], full, atol=1e-5)
    assert not np.allclose(read.cross[1], plain.cross[1], atol=1e-3)  # its last rows see the whole target
    np.testing.assert_array_equal(read.cross[0], plain.cross[0])  # other layers: the pass that predicts
    np.testing.assert_array_equal(read.encoder, plain.encoder)
    # value norms are those of the full-context weights at that layer: α_fc ‖W_O v‖, the same ‖W_O v‖
    ratio = read.map("cross", "value_norms").weights[1] / read.cross[1]
    np.testing.assert_allclose(ratio, plain.map("cross", "value_norms").weights[1] / plain.cross[1], rtol=1e-4)
    np.testing.assert_array_equal(
        read.map("cross", "value_norms").weights[0], plain.map("cross", "value_norms").weights[0]
    )
    np.testing.assert_array_equal(
        read.map("cross", "alti").layers, plain.map("cross", "alti").layers
    )  # of the pass that predicts
    np.testing.assert_allclose(read.map("cross", PER_LAYER).layers[1], 2 * read.cross[1].mean(0), rtol=1e-6)
    np.testing.assert_array_equal(
        read.map("cross", WHOLE).layers, plain.map("cross", WHOLE).layers
    )  # whole model: as predicted


def test_a_map_without_its_sinks_is_the_softmax_over_the_other_keys():
    """A head's weights without </s> and punctuation, renormalized, are its softmax over the other
    keys alone, computed here from the head's own Q and K (Model.inspect); a layer's map is its
    average renormalized the same way; rows and the label say what was done."""
    model = qkvmt.load("multi30k-de-en", device="cpu")
    source, reference = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.", "A man in an orange hat staring."
    sa = model.attention(source, reference, signals=["weights"])
    whole, m = sa.map("cross"), sa.map("cross", drop=("</s>", "punctuation"))
    keep = [t.lstrip("▁") not in {",", ".", "</s>"} for t in sa.src_tokens]
    assert sum(keep) == len(keep) - 3 and m.cols == [t for t, k in zip(sa.src_tokens, keep) if k]
    assert m.rows == whole.rows and m.weights.shape == (*whole.weights.shape[:3], sum(keep))
    assert m.signal_label == "attention weights without </s> and punctuation (renormalized)"
    for layer in range(m.weights.shape[0]):
        for head in (0, m.weights.shape[1] - 1):
            seen = model.inspect(source, reference, kind="cross", layer=layer, head=head)
            scores = torch.tensor(seen.q) @ torch.tensor(seen.k).T / math.sqrt(seen.d_k)  # (T, S)
            torch.testing.assert_close(
                torch.tensor(m.weights[layer, head]), scores[:, keep].softmax(-1), atol=1e-5, rtol=0
            )
    average = whole.layers[..., keep]
    np.testing.assert_allclose(m.layers, average / average.sum(-1, keepdims=True), atol=1e-6)
