"""Model.run_with_cache, run_with_hooks and translate(hooks=): a cache holds what the model computes
(its own outputs, pre- and post-LN, recomputed here without hooks), labelled by the tokens of each
axis, and only what was asked for; the built-in edits are what the same hook written by hand does;
a bad call is one line."""

import pytest
import torch

import qkvmt
from qkvmt.errors import UserError
from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.weights_folder import write_weights_folder
from qkvmt.text.tokenizer import encode, encode_target
from tests.analysis.test_trace import close, no_hooks
from tests.model.test_weights_folder import nontrivial_model

SOURCES = ["w1 w2 w3 w4 w5", "w7 w8"]  # of two lengths: the shorter padded
TARGETS = ["w3 w9 w4", "w11 w12 w13 w14"]


@pytest.fixture(scope="module", params=[False, True], ids=["post-LN", "pre-LN"])
def noisy(request, tmp_path_factory):
    """A qkvmt.Model of a 2+2-layer model whose biases and LayerNorms are far from 0 and 1."""
    folder = tmp_path_factory.mktemp("noisy")
    write_weights_folder(*nontrivial_model(norm_first=request.param), folder)
    return qkvmt.load(folder, device="cpu")


def batch(model):
    """The sources and targets as a forced pass reads them, built here from the tokenizer."""
    c, tok = model.transformer.cfg, model.tokenizer
    src_ids, tgt_ids = encode(tok, SOURCES), encode_target(tok, TARGETS)
    src = torch.full((2, max(map(len, src_ids)) + 1), c.pad_id)
    tgt_in = torch.full((2, max(map(len, tgt_ids)) + 1), c.pad_id)
    for i, (s, t) in enumerate(zip(src_ids, tgt_ids)):
        src[i, : len(s) + 1] = torch.tensor([*s, c.eos_id])
        tgt_in[i, : len(t) + 1] = torch.tensor([c.bos_id, *t])
    return src, tgt_in, src_ids, tgt_ids


def test_a_cache_holds_what_the_model_computes(noisy):
    cache = noisy.run_with_cache(SOURCES, TARGETS)
    m = noisy.transformer
    src, tgt_in, _, _ = batch(noisy)
    with torch.no_grad():
        logits, weights = m(src, tgt_in, need_weights=True)
        memory, _, _ = m.encode(src)
    assert cache.names == noisy.hook_names()  # names=None: every activation
    close(cache["logits"], logits)
    close(cache["encoder.out"], memory)
    close(m.output(cache["decoder.out"]), logits)
    for i, w in enumerate(weights.encoder):
        close(cache[f"encoder.{i}.self.weights"], w)
    for i, (self_w, cross_w) in enumerate(zip(weights.decoder, weights.cross)):
        close(cache[f"decoder.{i}.self.weights"], self_w)
        close(cache[f"decoder.{i}.cross.weights"], cross_w)
    for stack, layers in (("encoder", m.encoder_layers), ("decoder", m.decoder_layers)):
        for i, layer in enumerate(layers):
            ffn = layer.ffn
            with torch.no_grad():
                out = ffn.fc2(ffn.activation(ffn.fc1(cache[f"{stack}.{i}.ffn.in"])))
            close(cache[f"{stack}.{i}.ffn.out"], out)
            if i + 1 < len(layers):
                close(cache[f"{stack}.{i + 1}.resid_pre"], cache[f"{stack}.{i}.resid_post"])


def test_labels_are_the_source_tokens_and_the_output_tokens(noisy):
    cache = noisy.run_with_cache(SOURCES, TARGETS, names="**.weights")
    tok, c = noisy.tokenizer, noisy.transformer.cfg
    _, _, src_ids, tgt_ids = batch(noisy)
    names = lambda ids: [tok.id_to_token(i) for i in ids]  # noqa: E731
    source = [names([*s, c.eos_id]) for s in src_ids]
    output, read = [names([*t, c.eos_id]) for t in tgt_ids], [names([c.bos_id, *t]) for t in tgt_ids]
    heads = list(range(c.n_heads))
    assert cache.labels("encoder.1.self.weights") == {"batch": SOURCES, "head": heads, "query": source, "key": source}
    assert cache.labels("decoder.1.cross.weights") == {"batch": SOURCES, "head": heads, "query": output, "key": source}
    assert cache.labels("decoder.0.self.weights") == {"batch": SOURCES, "head": heads, "query": output, "key": read}


def test_caching_one_layers_weights_keeps_that_tensor_and_runs_that_layer_alone_on_the_explicit_path(noisy):
    m = noisy.transformer
    explicit = []

    def counts(name):  # the explicit path is the one that returns weights
        return lambda module, args, out: explicit.append(name) if out[1] is not None else None

    handles = [
        module.register_forward_hook(counts(name))
        for name, module in m.named_modules()
        if isinstance(module, MultiHeadAttention)
    ]
    try:
        cache = noisy.run_with_cache(SOURCES, TARGETS, names="decoder.1.cross.weights")
    finally:
        for h in handles:
            h.remove()
    assert cache.names == ["decoder.1.cross.weights"]
    assert explicit == ["decoder_layers.1.cross_attn"]
    close(cache["decoder.1.cross.weights"], noisy.run_with_cache(SOURCES, TARGETS)["decoder.1.cross.weights"])
    assert no_hooks(m)


def test_a_bad_call_is_one_line(noisy):
    with pytest.raises(UserError, match=r"hooks\['decoder\.1\.ffn\.out'\]=3: give a function"):
        noisy.translate(SOURCES, hooks={"decoder.1.ffn.out": 3})
    with pytest.raises(UserError, match="2 sources and 1 targets"):
        noisy.run_with_hooks(SOURCES, TARGETS[:1], hooks={"logits": lambda t, ctx: None})
    with pytest.raises(UserError, match="close names: decoder.1.cross.v"):
        noisy.hook_names("decoder.1.cros.v")
    assert no_hooks(noisy.transformer)


class Oops(Exception):
    pass


def test_a_hook_that_raises_in_translate_raises_the_users_exception_and_leaves_no_hook(noisy):
    def fails(t, ctx):
        raise Oops("mine")

    with pytest.raises(Oops, match="^mine$"):
        noisy.translate(SOURCES, hooks={"decoder.*.cross.v": fails})
    assert no_hooks(noisy.transformer)


@pytest.fixture(scope="module")
def bundled():
    return qkvmt.load("multi30k-de-en", device="cpu")


SENTENCE, DONOR = "Ein Hund rennt über die Wiese .", "Ein Mann rennt über die Wiese ."


def zero_head_1(heads, ctx):  # (batch, query, d_model): head 1's slice of W_O's input
    d_k = heads.size(-1) // 4
    heads = heads.clone()
    heads[..., d_k : 2 * d_k] = 0
    return heads


def swap_keys_1_2(k, ctx):  # (batch, head, key, d_k)
    return k[:, :, [0, 2, 1, *range(3, k.size(2))]]


def donor_values(model):
    donor = model.run_with_cache(DONOR, "A man .", names="decoder.*.cross.v")

    def patch(v, ctx):  # the donor's values at source position 1, where its word differs
        v = v.clone()
        v[:, :, 1] = donor[ctx.name][:, :, 1]
        return v

    return patch


EDITS = {
    "zero": (lambda: qkvmt.Zero("output", heads=(1,)), lambda model: {"decoder.*.cross.heads": zero_head_1}),
    "swap": (lambda: qkvmt.Swap(1, 2, "keys"), lambda model: {"decoder.*.cross.k": swap_keys_1_2}),
    "patch": (lambda: qkvmt.Patch(DONOR, "values"), lambda model: {"decoder.*.cross.v": donor_values(model)}),
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_built_in_edit_is_the_same_hook_written_by_hand(bundled, edit):
    typed, by_hand = EDITS[edit]
    assert bundled.transformer.cfg.n_heads == 4
    result = bundled.intervene(SENTENCE, typed(), beam_size=2)
    hooks = by_hand(bundled)
    assert bundled.translate(SENTENCE, hooks=hooks, beam_size=2)[0] == result.edited
    logits = bundled.run_with_hooks(SENTENCE, result.original, hooks)["logits"][0]
    original = [*encode_target(bundled.tokenizer, [result.original])[0], bundled.transformer.cfg.eos_id]
    log_prob = logits.log_softmax(-1)[torch.arange(len(original)), original]
    torch.testing.assert_close(log_prob.numpy(), result.log_prob_edited, atol=1e-4, rtol=1e-4)
    assert (abs(result.log_prob_edited - result.log_prob) > 1e-3).any()  # the edit changed the model
    assert no_hooks(bundled.transformer)
