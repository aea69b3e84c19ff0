"""The trace: each site holds what the model computed there, an edit replaces a site's tensor and
leaves no hook behind, every edit reaches search too (one of an explicit-path site switches its
layer to that path), and grad_of's gradients are those of autograd on a pass nobody traced."""

import pytest
import torch
import torch.nn.functional as F

from qkvmt.analysis.trace import KINDS, SiteEdit, attention_modules, edited, then, trace
from qkvmt.decoding.search import beam_search
from qkvmt.errors import UserError
from qkvmt.model.attention import attention_scores
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from tests.decoding.test_search import assert_same_hyps, rows_per_step, sentences_finishing_apart

ATOL = 1e-5


def noisy_model(norm_first=False, positions="sinusoidal", seed=0, encoder_layers=3, decoder_layers=3) -> Transformer:
    """Three layers each side (unless told), biases and layer norms far from their initial 0 and 1."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=40,
        d_model=16,
        n_heads=4,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        ffn_dim=32,
        norm_first=norm_first,
        positions=positions,
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.3)
            elif "norm" in name:  # LayerNorm weights
                p.uniform_(0.5, 1.5)
    return model


def pair(model: Transformer, seed=1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randperm(30, generator=g)[:6].add(4)[None]  # distinct ids: each source row is one token's
    tgt = torch.randint(4, 40, (1, 5), generator=g)
    tgt[0, 0] = model.cfg.bos_id
    return src, tgt


def no_hooks(model: Transformer) -> bool:
    return not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def close(a, b):
    torch.testing.assert_close(a, b, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("norm_first,positions", [(False, "sinusoidal"), (True, "sinusoidal"), (False, "rotary")])
def test_every_site_holds_what_the_model_computed(norm_first, positions):
    model = noisy_model(norm_first, positions)
    src, tgt = pair(model)
    t = trace(model, src, tgt)
    assert no_hooks(model)
    with torch.no_grad():
        logits, returned = model(src, tgt, need_weights=True)
        memory, src_mask, _ = model.encode(src)
    close(t.logits, logits)
    for kind in KINDS:
        for ours, theirs in zip(getattr(t.weights(), kind), getattr(returned, kind), strict=True):
            close(ours, theirs)  # the weights the model returns with need_weights=True
    close(t.src_embedded, model.src_embed(src))
    close(t.tgt_embedded, model.tgt_embed(tgt))
    close(t["encoder", 0].resid_pre, t.src_embedded)
    close(t["decoder", 0].resid_pre, t.tgt_embedded)
    for kind in KINDS:
        for layer, module in enumerate(attention_modules(model, kind)):
            site = t[kind, layer]
            assert site.module is module and site.layer == layer
            close(site.x, site.block.sublayer_input(site.resid_pre))  # the attention reads the residual stream
            if kind == "cross":
                close(site.y, memory)  # keys and values from the encoder's output
            else:
                assert site.y is None
            with torch.no_grad():
                q, k, v = module.head_projections(site.x, site.y)
            close(site.q, q), close(site.k, k), close(site.v, v)
            mask = {
                "encoder": src_mask,
                "cross": src_mask,
                "decoder": torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril(),
            }[kind]
            close(site.scores, attention_scores(q, k, mask))
            close(site.weights, site.scores.softmax(-1))
            b, h, t_q, d_k = q.shape
            close(site.heads, (site.weights @ v).transpose(1, 2).reshape(b, t_q, h * d_k))
            close(F.linear(site.heads, module.w_o.weight, module.w_o.bias), site.out)  # heads @ W_O + b
            total = site.resid_pre + site.out
            close(site.resid_post, total if norm_first else site.block.norm(total))
    # block_out is what the next sub-layer reads: the decoder's self-attention hands to its
    # cross-attention, and after the feed-forward block each layer hands to the next.
    for layer in range(model.cfg.decoder_layers):
        close(t["cross", layer].resid_pre, t["decoder", layer].resid_post)
    for kind, layers, nxt in (("encoder", model.encoder_layers, "encoder"), ("cross", model.decoder_layers, "decoder")):
        for layer in range(len(layers) - 1):
            with torch.no_grad():
                after_ffn, _ = layers[layer].ffn_block(
                    t[kind, layer].resid_post, lambda x, f=layers[layer].ffn: (f(x), None)
                )
            close(t[nxt, layer + 1].resid_pre, after_ffn)


def test_an_edit_replaces_its_site_and_leaves_no_hook_behind():
    model = noisy_model()
    src, tgt = pair(model)
    plain = trace(model, src, tgt)
    uniform = lambda w: torch.full_like(w, 1 / w.size(-1))  # noqa: E731
    edited_pass = trace(model, src, tgt, edits={("cross", 1, "weights"): uniform})
    site = edited_pass["cross", 1]
    close(site.weights, uniform(plain["cross", 1].weights))
    b, h, t_q, d_k = site.q.shape
    close(site.heads, (site.weights @ site.v).transpose(1, 2).reshape(b, t_q, h * d_k))  # downstream reads the edit
    close(edited_pass["cross", 0].weights, plain["cross", 0].weights)  # upstream does not
    assert not torch.allclose(edited_pass.logits, plain.logits)
    with edited(model, {("cross", -2, "weights"): uniform}):  # a layer counted from the end: the same site
        with torch.no_grad():
            logits, _ = model(src, tgt, need_weights=True)
    close(logits, edited_pass.logits)
    assert no_hooks(model)
    with pytest.raises(RuntimeError, match="inside"), edited(model, {("encoder", 0, "v"): torch.zeros_like}):
        raise RuntimeError("inside")
    assert no_hooks(model)
    close(trace(model, src, tgt).logits, plain.logits)  # the model is as it was
    for bad in (("cross", 3, "weights"), ("encoder", 0, "y"), ("self", 0, "q"), ("cross", 0, "nope"), "logits"):
        with pytest.raises(ValueError, match="no (model )?site"):
            with edited(model, {bad: uniform}):
                pass
    assert no_hooks(model)


def search_logits(model: Transformer, src, tgt) -> torch.Tensor:
    """Logits of each target position as search computes them: one step at a time, the fused
    attention kernel, keys and values cached (no weights asked for, so no attention site runs)."""
    with torch.no_grad():
        memory, src_mask, _ = model.encode(src)
        state = model.new_state()
        steps = [
            model.decode(tgt[:, i : i + 1], memory, src_mask, state=state, last_only=True)[0]
            for i in range(tgt.size(1))
        ]
    return torch.cat(steps, dim=1)


def test_an_edit_of_the_heads_reaches_search():
    model = noisy_model()
    src, tgt = pair(model)
    d_k = model.cfg.d_model // model.cfg.n_heads

    def without_head_1(heads):
        heads = heads.clone()
        heads[..., d_k : 2 * d_k] = 0
        return heads

    masked = {("cross", 2, "heads"): without_head_1}
    plain, forced = trace(model, src, tgt), trace(model, src, tgt, edits=masked)
    close(search_logits(model, src, tgt), plain.logits)
    with edited(model, masked):
        close(search_logits(model, src, tgt), forced.logits)
    assert not torch.allclose(forced.logits, plain.logits)
    assert no_hooks(model)


# An edit of each explicit-path site that means the same one step at a time as in one pass:
# elementwise, or over the source's positions, which a cached search sees whole at every step.
EXPLICIT_EDITS = {
    "q": (("decoder", 1, "q"), lambda t: 1.5 * t),
    "k": (("encoder", 0, "k"), lambda t: t.flip(2)),
    "v": (("cross", 2, "v"), lambda t: t.roll(1, dims=2)),
    "scores": (("cross", 0, "scores"), lambda t: t / 2),
    "weights": (("decoder", 2, "weights"), lambda t: t**2),
    "mask": (("cross", 1, "mask"), lambda m: m & (torch.arange(m.size(-1)) != 1)),  # no query reads key 1
}


@pytest.mark.parametrize("site", EXPLICIT_EDITS)
def test_an_edit_of_an_explicit_path_site_switches_search_to_that_path_and_takes_effect(site):
    model = noisy_model()
    src, tgt = pair(model)
    where, edit = EXPLICIT_EDITS[site]
    plain, forced = trace(model, src, tgt), trace(model, src, tgt, edits={where: edit})
    assert not torch.allclose(forced.logits, plain.logits, atol=1e-3)
    with edited(model, {where: edit}):
        close(search_logits(model, src, tgt), forced.logits)  # the fused kernel would have ignored it
    close(search_logits(model, src, tgt), plain.logits)
    assert no_hooks(model)


def knock_out(mask):  # query 2 may not read key 3
    mask = mask.clone()
    mask[..., 2, 3] = False
    return mask


@pytest.mark.parametrize(
    "knockout",
    [SiteEdit(knock_out, indexes_queries=True), then(SiteEdit(knock_out, indexes_queries=True), lambda mask: mask)],
    ids=["alone", "then-a-plain-function"],
)
def test_an_edit_of_query_positions_is_refused_under_the_cache_and_taken_without_it(knockout):
    model = noisy_model()
    src, tgt = pair(model)
    where = ("cross", 1, "mask")
    forced = trace(model, src, tgt, edits={where: knockout})
    with edited(model, {where: knockout}):
        with pytest.raises(UserError, match="use_cache=False"):
            search_logits(model, src, tgt)
        with torch.no_grad():
            memory, src_mask, _ = model.encode(src)
            close(model.decode(tgt, memory, src_mask)[0], forced.logits)
    assert not torch.allclose(forced.logits[:, 2], trace(model, src, tgt).logits[:, 2], atol=1e-3)
    close(forced.logits[:, :2], trace(model, src, tgt).logits[:, :2])  # earlier queries are untouched
    assert no_hooks(model)


@pytest.mark.parametrize(
    "edit,kept",
    [
        (lambda t: t, True),  # a plain function may read rows by their place
        (SiteEdit(lambda t: t, keeps_rows=False), False),
        (then(SiteEdit(lambda t: t, keeps_rows=False), lambda t: t), True),
    ],
    ids=["plain-function", "rows-may-leave", "then-a-plain-function"],
)
def test_a_search_under_an_edit_that_keeps_rows_keeps_every_sentence_in_the_batch(edit, kept):
    model, src, cfg, single = sentences_finishing_apart(early_stopping=True, use_cache=True)
    with edited(model, {("cross", 1, "heads"): edit}):
        seen = rows_per_step(model, lambda: assert_same_hyps(beam_search(model, src, cfg), single))
    assert (set(seen[1:]) == {seen[1]}) == kept
    assert min(rows_per_step(model, lambda: beam_search(model, src, cfg))[1:]) < seen[1]  # closed: rows leave
    assert no_hooks(model)


@pytest.mark.parametrize("norm_first", [False, True])
def test_grad_of_gives_autograds_gradients_of_an_untraced_pass(norm_first):
    model = noisy_model(norm_first)
    src, tgt = pair(model)
    row, token = 3, 17
    model.zero_grad()
    t = trace(model, src, tgt, grad_of=(row, token))
    traced_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    assert no_hooks(model)

    model.zero_grad()  # the same pass by hand, with nothing hooked: the encoder from its embedded input
    embedded = model.src_embed(src)
    embedded.retain_grad()
    src_mask, x = model.source_mask(src), embedded
    for layer in model.encoder_layers:
        x, _ = layer(x, src_mask)
    logits, _, _ = model.decode(tgt, model.encoder_norm(x), src_mask)
    logits[0, row].log_softmax(-1)[token].backward()

    close(t.src_embedded.grad, embedded.grad)
    assert traced_grads.keys() == {name for name, p in model.named_parameters() if p.grad is not None}
    for name, p in model.named_parameters():
        if p.grad is not None:
            close(traced_grads[name], p.grad)
    assert (
        t["cross", 2].weights.grad is not None and t["encoder", 0].resid_post.grad is not None
    )  # every site has its own
    model.zero_grad()
