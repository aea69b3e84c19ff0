"""The attention ablations (ModelConfig's query_projection, key_projection, value_projection,
shared_query_key, shared_key_value, output_projection): each against an independent computation
from the raw weights, on both attention paths, in cached decoding, in checkpoints, through the
analyses and in training."""

import json
import math
import shutil

import pytest
import torch

import qkvmt
from qkvmt.analysis.signals import SIGNALS
from qkvmt.analysis.trace import KINDS, attention_modules, trace
from qkvmt.analysis.value_norms import transformed_values
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.loading import load_model
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.positions import POSITIONS
from qkvmt.model.transformer import Transformer
from qkvmt.model.weights_folder import write_weights_folder
from qkvmt.text.tokenizer import Specials, train_bpe
from tests.conftest import compose_train, tiny_overrides, training_fixture, write_corpus

D, H, V = 16, 4, 23
ENC, DEC = 2, 3
MODULES = ENC + 2 * DEC  # attention modules: the encoder's self-, the decoder's self- and cross-attention
VARIANTS = {
    "no_value": dict(value_projection=False),
    "shared_key_value": dict(shared_key_value=True),
    "no_query": dict(query_projection=False),
    "no_key": dict(key_projection=False),
    "shared_query_key": dict(shared_query_key=True),
    "no_query_key": dict(query_projection=False, key_projection=False),
    "identity": dict(query_projection=False, key_projection=False, value_projection=False),
    "no_output": dict(output_projection=False),
    "all_three": dict(query_projection=False, value_projection=False, output_projection=False),
}
SINGLE_ABLATIONS = [v for v in VARIANTS.values() if len(v) == 1]  # each setting alone
# What makes each variant's Q, K and V, written out from the definitions: the matrix's letter, "." none.
SOURCES = {
    "no_value": "qk.",
    "shared_key_value": "qkk",
    "no_query": ".kv",
    "no_key": "q.v",
    "shared_query_key": "kkv",
    "no_query_key": "..v",
    "identity": "...",
    "no_output": "qkv",
    "all_three": ".k.",
}
WITHOUT_W_O = ("no_output", "all_three")
# The (D, D) matrices each variant removes from every attention.
REMOVED = {v: 3 - len(set(s) - {"."}) + (v in WITHOUT_W_O) for v, s in SOURCES.items()}
EACH = pytest.mark.parametrize("variant", VARIANTS)
POSITIONS_TOO = pytest.mark.parametrize("positions", POSITIONS)


def make_model(variant: str | None = None, seed: int = 0, **overrides) -> Transformer:
    """A small model of the variant in eval mode, with non-zero biases and layer norms that are not
    the identity, so a misplaced or missing one shows."""
    torch.manual_seed(seed)
    cfg = dict(vocab_size=V, d_model=D, n_heads=H, encoder_layers=ENC, decoder_layers=DEC, ffn_dim=32, max_positions=40)
    model = Transformer(ModelConfig(**(cfg | VARIANTS.get(variant, {}) | overrides))).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return model


def ids(b: int, t: int, lengths: list[int] | None = None, seed: int = 1, vocab: int = V) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.randint(3, vocab, (b, t), generator=g)
    if lengths is not None:
        out[torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]] = 0
    return out


# --- 1. known answers: each variant against the raw weights -----------------------------------


def split(t: torch.Tensor) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, d_k): head h takes columns h·d_k .. (h+1)·d_k - 1."""
    return t.reshape(t.size(0), t.size(1), H, D // H).transpose(1, 2)


def reference(variant: str, module, x: torch.Tensor, y: torch.Tensor, allowed: torch.Tensor):
    """Q, K, V and the attention's output written out for the variant from w_qkv's blocks and
    w_o, independently of the module's code: allowed (B, 1, T_q, T_k) bool, True = may attend."""
    sources = SOURCES.get(variant, "qkv")
    blocks = [name for name in "qkv" if name in sources]
    proj = {}
    if blocks:
        w, b = module.w_qkv.weight, module.w_qkv.bias
        proj = {name: (w[i * D : (i + 1) * D], b[i * D : (i + 1) * D]) for i, name in enumerate(blocks)}
        assert tuple(w.shape) == (len(blocks) * D, D)
    else:
        assert module.w_qkv is None
    made = lambda t, name: split(t) if name == "." else split(t @ proj[name][0].T + proj[name][1])  # noqa: E731
    q, k, v = made(x, sources[0]), made(y, sources[1]), made(y, sources[2])
    scores = (q @ k.transpose(-2, -1) / math.sqrt(D // H)).masked_fill(~allowed, float("-inf"))
    heads = (scores.softmax(-1) @ v).transpose(1, 2).reshape(x.size(0), x.size(1), D)  # (B, T_q, D)
    out = heads if variant in WITHOUT_W_O else heads @ module.w_o.weight.T + module.w_o.bias
    return q, k, v, out


@EACH
@pytest.mark.parametrize("kind", ["self", "cross"])
def test_each_variant_computes_what_its_definition_says(variant, kind):
    """Self-attention (causal) and cross-attention (with padded keys), on both paths; and the
    values the definition names: y's own slices (no W_V), the keys (shared), x's slices (no W_Q)."""
    layer = make_model(variant).decoder_layers[1]
    module = layer.self_attn if kind == "self" else layer.cross_attn
    x, y = torch.randn(2, 5, D), torch.randn(2, 6, D)
    if kind == "self":
        y, allowed, call = x, torch.ones(5, 5, dtype=torch.bool).tril()[None, None], dict(causal=True)
        args = (x,)
    else:
        allowed = (torch.arange(6)[None, :] < torch.tensor([6, 4])[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
        args, call = (x, y), dict(mask=allowed)
    q, k, v, out = reference(variant, module, x, y, allowed)
    with torch.no_grad():
        ours = module.head_projections(*args)
        for need_weights in (True, False):
            torch.testing.assert_close(module(*args, **call, need_weights=need_weights)[0], out, atol=1e-5, rtol=0)
    for mine, theirs in zip(ours, (q, k, v)):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
    for i, (name, t) in enumerate(zip("qkv", (x, y, y))):
        if SOURCES.get(variant, "qkv")[i] == ".":  # no projection: the input's own slices, exactly
            assert torch.equal(ours[i], split(t)), name
    if variant == "shared_key_value":
        assert torch.equal(ours[2], ours[1])
    if variant == "shared_query_key" and kind == "self":
        assert torch.equal(ours[0], ours[1])  # one projection of one input: the scores are symmetric


def test_shared_keys_and_values_give_the_values_the_keys_before_their_rotation():
    module = make_model("shared_key_value", positions="rotary").encoder_layers[0].self_attn
    with torch.no_grad():
        _, k, v = module.head_projections(torch.randn(2, 5, D), offset=3)
    assert not torch.allclose(v, k)
    torch.testing.assert_close(module.positions(v, 3), k)  # one projection: the keys are the values turned


@EACH
def test_head_projections_keep_their_contract_for_chosen_heads(variant):
    """heads= picks and orders heads; values=False leaves V out; kv=False gives Q alone; and
    head_weights (the alignment loss's) equal forward's weights of those heads."""
    model = make_model(variant)
    for module, y in ((model.decoder_layers[0].self_attn, None), (model.decoder_layers[2].cross_attn, 1)):
        x = torch.randn(2, 5, D)
        y = torch.randn(2, 7, D) if y else None
        with torch.no_grad():
            whole = module.head_projections(x, y)
            picked = module.head_projections(x, y, heads=[2, 0])
            no_v = module.head_projections(x, y, heads=[3], values=False)
            weights = module(x, y, need_weights=True)[1]
            some = module.head_weights(x, y, heads=[1, 3])
        for mine, all_heads in zip(picked, whole):
            torch.testing.assert_close(mine, all_heads[:, [2, 0]])
        assert no_v[2] is None
        torch.testing.assert_close(no_v[1], whole[1][:, [3]])
        torch.testing.assert_close(some, weights[:, [1, 3]], atol=1e-6, rtol=0)
        if y is not None:
            q, k, v = module.head_projections(x, y, kv=False)
            assert k is None and v is None and torch.equal(q, whole[0])


# --- 2. the whole model: both paths, cached decoding, parameters ------------------------------


@EACH
@POSITIONS_TOO
def test_fused_and_explicit_paths_agree(variant, positions):
    model = make_model(variant, positions=positions)
    src, tgt = ids(3, 7, [7, 4, 2]), ids(3, 6, seed=2)
    with torch.no_grad():
        fused, _ = model(src, tgt)
        explicit, weights = model(src, tgt, need_weights=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    assert len(weights.cross) == DEC and weights.cross[0].shape == (3, H, 6, 7)


@EACH
@POSITIONS_TOO
@pytest.mark.parametrize("beam_size", [1, 3])
def test_cached_decoding_equals_uncached(variant, positions, beam_size):
    model = make_model(variant, seed=4, positions=positions)
    with torch.no_grad():
        model.output.weight.mul_(3.0)  # peaky distributions: no near-ties to flip on rounding
    src = ids(3, 6, [6, 3, 5], seed=5)
    common = dict(beam_size=beam_size, max_len_a=1.0, max_len_b=3)
    cached = generate(model, src, DecodeConfig(**common, use_cache=True))
    uncached = generate(model, src, DecodeConfig(**common, use_cache=False))
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    assert [h.score for h in cached] == pytest.approx([h.score for h in uncached], abs=1e-4)
    assert any(h.tokens for h in cached)


@EACH
def test_the_parameter_count_drops_by_exactly_the_removed_matrices(variant):
    full, ablated = make_model(), make_model(variant)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(full) - count(ablated) == REMOVED[variant] * MODULES * (D * D + D)  # weights and biases
    blocks = len(set(SOURCES[variant]) - {"."})
    has_w_o = variant not in WITHOUT_W_O
    for kind in KINDS:
        for module in attention_modules(ablated, kind):
            if blocks:
                assert module.w_qkv.weight.shape == (blocks * D, D) and module.w_qkv.bias.shape == (blocks * D,)
            else:  # every projection the identity: no matrix at all, not an empty one
                assert module.w_qkv is None
            assert [tuple(p.shape) for p in module.w_o.parameters()] == ([(D, D), (D,)] if has_w_o else [])


@EACH
def test_each_stacked_block_is_initialised_as_its_own_square_matrix(variant):
    bound = (6 / (2 * D)) ** 0.5  # Xavier of one (D, D) matrix
    for module in attention_modules(make_model(variant), "encoder"):
        for block in module.w_qkv.weight.detach().split(D) if module.w_qkv is not None else ():
            assert 0.9 * bound < float(block.abs().max()) <= bound


def test_the_default_model_is_the_paper_s():
    """Every attention keeps W_Q, W_K, W_V stacked (3D, D) and W_O (D, D), under the same names."""
    model = make_model()
    assert model.cfg.ablations() == []
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items() if "_attn." in k}
    expected = {"w_qkv.weight": (3 * D, D), "w_qkv.bias": (3 * D,), "w_o.weight": (D, D), "w_o.bias": (D,)}
    prefixes = [f"encoder_layers.{i}.self_attn" for i in range(ENC)]
    prefixes += [f"decoder_layers.{i}.{a}" for i in range(DEC) for a in ("self_attn", "cross_attn")]
    assert shapes == {f"{p}.{name}": shape for p in prefixes for name, shape in expected.items()}


ABLATION_FIELDS = ("query_projection", "key_projection", "value_projection", "shared_query_key", "shared_key_value")
ABLATION_FIELDS += ("output_projection",)


def test_the_bundled_models_and_configurations_older_than_the_ablations_load_as_the_paper_s(tmp_path):
    """The bundled models load strictly as the paper's model; so does a model folder whose stored
    configuration predates the ablation settings (those fields taken out), to the same weights."""
    for bundled in qkvmt.pretrained():
        model, _, _ = load_model(bundled.folder)
        assert model.cfg.ablations() == [] and model.encoder_layers[0].self_attn.blocks == "qkv"
        older = tmp_path / bundled.name
        shutil.copytree(bundled.folder, older)
        stored = json.loads((older / "qkvmt.json").read_text())
        assert "query_projection" in stored["model_config"]  # the bundled models know the first ablations
        for k in ABLATION_FIELDS:
            stored["model_config"].pop(k, None)
        (older / "qkvmt.json").write_text(json.dumps(stored))
        again, _, meta = load_model(older)
        assert not any(k in meta.model_config for k in ABLATION_FIELDS) and again.cfg.ablations() == []
        expected = model.state_dict()
        assert all(torch.equal(v, expected[k]) for k, v in again.state_dict().items())


# --- 3. configuration ------------------------------------------------------------------------


def test_contradictory_settings_are_one_line_user_errors():
    for shared, other in (("shared_key_value", "value"), ("shared_key_value", "key"), ("shared_query_key", "query")):
        with pytest.raises(UserError, match=rf"model\.{shared}=true .* model\.{other}_projection=false") as e:
            ModelConfig(vocab_size=10, **{shared: True, f"{other}_projection": False})
        assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"model\.output_projection='no': give true or false"):
        ModelConfig(vocab_size=10, output_projection="no")


def test_ablations_name_the_settings_that_differ_from_the_paper():
    cfg = ModelConfig(vocab_size=10, query_projection=False, shared_key_value=True)
    assert cfg.ablations() == ["model.query_projection=false", "model.shared_key_value=true"]


def test_hydra_sets_them_on_the_command_line():
    cfg = compose_train("experiment=multi30k_de_en_cpu", "model.value_projection=false", "model.n_heads=1")
    from hydra.utils import instantiate

    model_cfg = instantiate(cfg.model)(vocab_size=100)
    assert model_cfg.ablations() == ["model.value_projection=false"] and model_cfg.n_heads == 1


# --- 4. checkpoints and analyses ------------------------------------------------------------


def saved(variant: str | None, tmp_path, seed: int = 0):
    """The variant with the toy corpus's tokenizer, written as a .ckpt and as a model folder."""
    lines = ["w1 w2 w3 w4", "w2 w1", "t3 t2 t1 w4 w4", "w3 w3 t1 t2"]
    tok = train_bpe(lines, vocab_size=40, min_frequency=1)
    fields = Specials.of(tok).config_fields()
    model = make_model(variant, seed, vocab_size=tok.get_vocab_size(), **fields)
    meta = CheckpointMeta(model.cfg.to_dict(), tok.to_str(), "de", "en", decode={"beam_size": 2})
    ckpt = tmp_path / "model.ckpt"
    weights = {f"model.{k}": v for k, v in model.state_dict().items()}
    torch.save({"state_dict": weights, "qkvmt": meta.to_dict()}, ckpt)
    folder = tmp_path / "folder"
    folder.mkdir()
    write_weights_folder(model, tok, meta, folder)
    return model, ckpt, folder


@EACH
def test_a_checkpoint_round_trip_gives_the_same_model(variant, tmp_path):
    model, ckpt, folder = saved(variant, tmp_path)
    src, tgt = ids(2, 5, [5, 3], vocab=model.cfg.vocab_size), ids(2, 4, seed=3, vocab=model.cfg.vocab_size)
    for path in (ckpt, folder):
        loaded, _, meta = load_model(path)
        assert loaded.cfg == model.cfg and meta.model_config == model.cfg.to_dict()
        assert loaded.state_dict().keys() == model.state_dict().keys()
        with torch.no_grad():
            assert torch.equal(loaded(src, tgt)[0], model(src, tgt)[0])


def test_a_checkpoint_without_the_settings_loads_as_the_paper_s_model(tmp_path):
    model, ckpt, _ = saved(None, tmp_path)
    raw = torch.load(ckpt, weights_only=True)
    for name in ABLATION_FIELDS:
        del raw["qkvmt"]["model_config"][name]
    torch.save(raw, tmp_path / "old.ckpt")
    old, _, _ = load_model(tmp_path / "old.ckpt")
    src, tgt = ids(2, 5, [5, 3], vocab=model.cfg.vocab_size), ids(2, 4, seed=3, vocab=model.cfg.vocab_size)
    assert old.cfg == model.cfg
    with torch.no_grad():
        assert torch.equal(old(src, tgt)[0], model(src, tgt)[0])


@pytest.mark.parametrize("variant", ["no_output", "all_three"])
def test_without_w_o_each_key_adds_its_value_into_its_head_s_own_columns(variant):
    """The value norms' and ALTI+'s vectors: W_O^h v_j with the identity as W_O."""
    traced = trace(make_model(variant), ids(1, 5), ids(1, 4, seed=2))
    for kind in KINDS:
        for seen in traced.layers[kind]:
            values = transformed_values(seen)  # (B, H, T_k, D)
            for h in range(H):
                cols = slice(h * D // H, (h + 1) * D // H)
                torch.testing.assert_close(values[:, h, :, cols], seen.v[:, h].float())
                assert not values[:, h].clone().index_fill_(-1, torch.arange(D)[cols], 0).any()


@EACH
def test_every_analysis_reads_the_variant(variant, tmp_path):
    """Translation, every signal of a forced pass, an alignment, and one head's Q, K, V, which
    inspect checks against the layer's own output."""
    _, _, folder = saved(variant, tmp_path, seed=2)
    model = qkvmt.load(folder, device="cpu")
    assert len(model.translate(["w1 w2 w3", "w2 w2"])) == 2
    source, target = "w1 w2 w3 w4", "t3 t2 t1"
    attention = model.attention(source, target, signals=list(SIGNALS))
    for kind in KINDS:
        assert attention.map(kind).weights.shape[:2] == (ENC if kind == "encoder" else DEC, H)
    assert model.align(source, target).pharaoh is not None
    for kind in KINDS:
        head = model.inspect(source, target, kind=kind, layer=-1, head=H - 1)
        assert head.value_norms.shape == (len(head.key_tokens),)
        assert max(head.check.values()) < 1e-4


# --- 5. training through the real pipeline ---------------------------------------------------


@training_fixture(scope="module")
def trained_without_w_v(tmp_path_factory):
    """A tiny model without W_V trained for a few steps by `qkvmt train`, validated and tested."""
    from qkvmt.pipeline.train import train

    base = tmp_path_factory.mktemp("no_value")
    corpus = write_corpus(base / "corpus")
    run = base / "run"
    metrics = train(compose_train(*tiny_overrides(corpus, run, steps=8, val_every=4), "model.value_projection=false"))
    return {"run": run, "metrics": metrics}


def test_a_variant_trains_translates_and_loads(trained_without_w_v):
    run = trained_without_w_v["run"]
    model, _, meta = load_model(run / "checkpoints" / "last.ckpt")
    assert meta.model_config["value_projection"] is False and model.cfg.ablations() == ["model.value_projection=false"]
    assert all(module.blocks == "qk" for kind in KINDS for module in attention_modules(model, kind))
    loaded = qkvmt.load(run / "checkpoints" / "last.ckpt", device="cpu")
    assert len(loaded.translate(["w1 w2 w3"], beam_size=2)) == 1
