"""Tests for greedy and beam search (qkvmt.decoding.search), each on both engines (qkvmt.decoding.engine):
the eager step and the compiled one, compiled here by torch.compile's aot_eager backend (the same
tracing, guards and graphs as TorchInductor's, without its code generation, which tests/decoding/
test_compiled.py runs).

Two kinds of model are used:

* tiny random Transformers (a few thousand parameters, eval mode, fixed seeds), to check that
  the cached path, the batched path and the beam-size-1 path agree with their references;
* `TableModel`, a duck-typed stand-in whose next-token distribution is a hand-written table
  keyed on the target prefix, to build cases whose right answer is known by hand (greedy's
  trap, length-penalty trade-offs, exact length limits).
"""

import functools
import math
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch import nn

from qkvmt.decoding import compiled as compiled_step
from qkvmt.decoding import engine as engines
from qkvmt.decoding import greedy, search
from qkvmt.decoding.engine import generate
from qkvmt.decoding.greedy import greedy_search
from qkvmt.decoding.rows import rows_kept
from qkvmt.decoding.search import DecodeConfig, beam_search, length_penalty, stable_order
from qkvmt.model.config import ModelConfig
from qkvmt.model.positions import POSITIONS
from qkvmt.model.transformer import Transformer

PAD, BOS, EOS = 0, 1, 2


def on_compiled_step(search_fn, step_fn, model, src, cfg):
    """search_fn (beam_search or greedy_search) running step_fn compiled, where the model is a module
    decoding over its KV cache (else eagerly, as generate would)."""
    use = isinstance(model, nn.Module) and cfg.use_cache
    return search_fn(model, src, cfg, compiled_step.compiled(step_fn, src.device) if use else None)


@pytest.fixture(autouse=True, params=["eager", "compiled"])
def engine(request, monkeypatch):
    """Every test twice: as it is, and with each search of a module on the compiled step (generate's too);
    not a search without the KV cache, which decodes eagerly on either."""
    if request.param == "compiled" and getattr(request.node, "callspec", None):
        if request.node.callspec.params.get("use_cache") is False:
            pytest.skip("use_cache=False decodes eagerly on either engine: the eager run is this test")
    if request.param == "compiled":
        monkeypatch.setattr(compiled_step, "options", lambda device: {"dynamic": True, "backend": "aot_eager"})
        monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1000)  # many models and settings here
        monkeypatch.setattr(engines, "AUTO_SENTENCES", 0)
        for name, search_fn, step in (
            ("beam_search", search.beam_search, compiled_step.beam_step),
            ("greedy_search", greedy.greedy_search, greedy.greedy_step),
        ):
            monkeypatch.setitem(globals(), name, functools.partial(on_compiled_step, search_fn, step))
    return request.param


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def tiny_model(
    seed: int = 0,
    layers: int = 1,
    vocab: int = 16,
    d_model: int = 16,
    n_heads: int = 2,
    max_positions: int = 64,
    scale: float = 3.0,
    positions: str = "sinusoidal",
) -> Transformer:
    """A tiny random Transformer in eval mode; the (tied) output layer is scaled up so that
    next-token distributions are peaky and near-ties (which could flip on rounding) are rare."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=vocab,
        d_model=d_model,
        n_heads=n_heads,
        encoder_layers=layers,
        decoder_layers=layers,
        ffn_dim=2 * d_model,
        dropout=0.0,
        max_positions=max_positions,
        positions=positions,
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.output.weight.mul_(scale)
    return model


def padded_batch(lengths: list[int], vocab: int, seed: int = 123) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Right-padded (B, S) sources ending in EOS, with `lengths` counting EOS; also each row unpadded."""
    g = torch.Generator().manual_seed(seed)
    rows = [torch.cat([torch.randint(3, vocab, (n - 1,), generator=g), torch.tensor([EOS])]) for n in lengths]
    batch = torch.full((len(rows), max(lengths)), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, : len(r)] = r
    return batch, rows


@torch.no_grad()
def teacher_forced_logprob(model: Transformer, src_row: torch.Tensor, tokens: list[int]) -> float:
    """Sum of log P(token | prefix) over `tokens` followed by EOS, by one teacher-forced pass."""
    tgt = torch.tensor([[BOS] + tokens + [EOS]])
    logits, _ = model(src_row[None], tgt[:, :-1])
    logp = logits.float().log_softmax(-1)[0]
    return float(logp.gather(1, tgt[0, 1:, None]).sum())


class TableState:
    """Incremental state of TableModel: the target prefix seen so far, per row."""

    def __init__(self):
        self.prefix = None

    def reorder_beams(self, index: torch.Tensor) -> None:
        if self.prefix is not None:
            self.prefix = self.prefix.index_select(0, index)


class TableModel:
    """Duck-typed model for the decoders: P(next | target prefix) comes from a table.

    `table` maps a tuple of target tokens (BOS excluded) to {token: probability}; prefixes not in
    the table use `default`. Tokens not listed get probability 0 (logit -inf). Works with and
    without the decoder state (cache), so both decoding paths run against it.
    """

    def __init__(self, table: dict, default: dict | None = None, vocab: int = 10, max_positions: int = 64):
        self.cfg = ModelConfig(vocab_size=vocab, d_model=2, n_heads=1, max_positions=max_positions)
        self.table = table
        self.default = default if default is not None else {EOS: 1.0}
        self.calls = 0

    def encode(self, src: torch.Tensor, need_weights: bool = False):
        return src.float()[:, :, None], (src != PAD)[:, None, None, :], []

    def new_state(self) -> TableState:
        return TableState()

    def decode(self, ids, memory, src_mask, state=None, need_weights=False, last_only=False):
        self.calls += 1
        assert memory.size(0) == src_mask.size(0) and ids.size(0) % memory.size(0) == 0  # beams share memory
        if state is not None:
            state.prefix = ids if state.prefix is None else torch.cat([state.prefix, ids], dim=1)
            prefix = state.prefix
        else:
            prefix = ids
        assert bool((prefix[:, 0] == BOS).all())
        assert prefix.size(1) <= self.cfg.max_positions
        logits = torch.full((ids.size(0), self.cfg.vocab_size), float("-inf"))
        for i, row in enumerate(prefix.tolist()):
            for tok, p in self.table.get(tuple(row[1:]), self.default).items():
                logits[i, tok] = math.log(p)
        return logits[:, None, :].expand(-1, 1 if last_only else ids.size(1), -1), [], []

    def logprob(self, tokens: list[int]) -> float:
        """Log-probability of `tokens` followed by EOS, computed by hand from the table."""
        total, prefix = 0.0, ()
        for tok in tokens + [EOS]:
            p = self.table.get(prefix, self.default).get(tok, 0.0)
            if p == 0.0:
                return float("-inf")
            total += math.log(p)
            prefix += (tok,)
        return total


def assert_same_hyps(got, want, atol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.tokens == w.tokens
        assert g.score == pytest.approx(w.score, abs=atol)


# --------------------------------------------------------------------------------------------
# 1. cached == uncached
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("beam_size", [1, 4])
def test_cached_decoding_matches_uncached(seed, beam_size, positions):
    model = tiny_model(seed, layers=2, positions=positions)
    src, _ = padded_batch([3, 6, 2, 5], model.cfg.vocab_size, seed=seed)
    common = dict(beam_size=beam_size, max_len_a=1.0, max_len_b=2)
    cached = generate(model, src, DecodeConfig(**common, use_cache=True))
    uncached = generate(model, src, DecodeConfig(**common, use_cache=False))
    assert_same_hyps(cached, uncached)
    assert any(h.tokens for h in cached)  # the comparison is not between empty outputs


@pytest.mark.parametrize("use_cache", [True, False])
def test_cached_and_uncached_table_model_agree_on_reordered_beams(use_cache):
    # Beams overtake each other at step 2, so a cache that was not reordered with its beam
    # would read the wrong prefix (the table model's state records the prefix itself).
    table = {
        (): {3: 0.6, 4: 0.4},
        (3,): {5: 0.5, 6: 0.5},
        (4,): {5: 0.9, 6: 0.1},
        (4, 5): {EOS: 0.9, 7: 0.1},
        (3, 5): {7: 1.0},
        (3, 6): {7: 1.0},
    }
    model = TableModel(table)
    src = torch.tensor([[5, 5, EOS]])
    cfg = DecodeConfig(beam_size=2, max_len_a=0, max_len_b=6, len_penalty=0.0, use_cache=use_cache)
    hyp = beam_search(model, src, cfg)[0]
    assert hyp.tokens == [4, 5]
    assert hyp.score == pytest.approx(model.logprob([4, 5]), abs=1e-5)


# --------------------------------------------------------------------------------------------
# 2. beam_size=1 beam search == greedy
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_equals_greedy(seed):
    model = tiny_model(seed)
    src, _ = padded_batch([4, 2, 7], model.cfg.vocab_size, seed=seed)
    greedy = greedy_search(model, src, DecodeConfig(beam_size=1, max_len_a=0, max_len_b=7))

    # len_penalty=0: the beam score is the raw sum of log-probabilities, as greedy's is.
    raw = beam_search(model, src, DecodeConfig(beam_size=1, max_len_a=0, max_len_b=7, len_penalty=0.0))
    assert_same_hyps(raw, greedy)

    # fairseq alpha=1: the beam score is the raw sum divided by the length, EOS included.
    norm = beam_search(model, src, DecodeConfig(beam_size=1, max_len_a=0, max_len_b=7, len_penalty=1.0))
    for b, g in zip(norm, greedy):
        assert b.tokens == g.tokens
        assert b.score * (len(b.tokens) + 1) == pytest.approx(g.score, abs=1e-4)
    assert any(h.tokens for h in greedy)


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("seed", [0, 3])
def test_scores_are_teacher_forced_logprobs(seed, positions):
    """Scores equal the log-probability of the returned tokens + EOS, recomputed by one
    teacher-forced forward pass (beam normalised by length^alpha)."""
    model = tiny_model(seed, positions=positions)
    src, rows = padded_batch([3, 5, 2], model.cfg.vocab_size, seed=seed)
    greedy = greedy_search(model, src, DecodeConfig(beam_size=1, max_len_a=0, max_len_b=6))
    beam = beam_search(model, src, DecodeConfig(beam_size=3, max_len_a=0, max_len_b=6, len_penalty=1.0))
    for row, g, b in zip(rows, greedy, beam):
        assert g.score == pytest.approx(teacher_forced_logprob(model, row, g.tokens), abs=1e-4)
        assert b.score * (len(b.tokens) + 1) == pytest.approx(teacher_forced_logprob(model, row, b.tokens), abs=1e-4)


def test_generate_dispatches_on_beam_size():
    model = tiny_model(4)
    src, _ = padded_batch([3, 5], model.cfg.vocab_size)
    g_cfg = DecodeConfig(beam_size=1, max_len_a=0, max_len_b=6)
    b_cfg = DecodeConfig(beam_size=3, max_len_a=0, max_len_b=6)
    assert_same_hyps(generate(model, src, g_cfg), greedy_search(model, src, g_cfg), atol=0)
    assert_same_hyps(generate(model, src, b_cfg), beam_search(model, src, b_cfg), atol=0)


# --------------------------------------------------------------------------------------------
# 3. batch == one sentence at a time
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("use_cache", [True, False])
def test_batch_equals_one_sentence_at_a_time(beam_size, use_cache):
    model = tiny_model(5)
    # Different source lengths give different length limits (a=1): the batch must honour each.
    src, rows = padded_batch([2, 6, 4, 3], model.cfg.vocab_size, seed=7)
    assert (src == PAD).any()
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=1.0, max_len_b=2, use_cache=use_cache)
    batched = generate(model, src, cfg)
    single = [generate(model, row[None], cfg)[0] for row in rows]
    assert_same_hyps(batched, single)
    assert len({tuple(h.tokens) for h in single}) > 1  # sentences actually differ


def rows_per_step(model, search) -> list[int]:
    """The decoder's rows at each step of search(), a function of no arguments."""
    seen, decode = [], model.decode

    def counted(ids, *args, **kwargs):  # an attribute of the instance, not a hook
        seen.append(ids.size(0))
        return decode(ids, *args, **kwargs)

    model.decode = counted
    try:
        search()
    finally:
        del model.decode
    return seen


def sentences_finishing_apart(early_stopping: bool, use_cache: bool):
    """A model, 8 sentences that finish at different steps, their beam search config, and each
    one searched alone."""
    model = tiny_model(5, layers=2)
    # a = 1: each source length its own limit, so sentences finish at different steps
    src, rows = padded_batch([2, 9, 3, 8, 2, 7, 4, 6], model.cfg.vocab_size, seed=11)
    cfg = DecodeConfig(beam_size=3, max_len_a=1.0, max_len_b=2, use_cache=use_cache, early_stopping=early_stopping)
    return model, src, cfg, [beam_search(model, row[None], cfg)[0] for row in rows]


@pytest.mark.parametrize("early_stopping", [True, False])
@pytest.mark.parametrize("use_cache", [True, False])
def test_done_sentences_leave_the_batch_unless_rows_are_kept(early_stopping, use_cache, engine):
    model, src, cfg, single = sentences_finishing_apart(early_stopping, use_cache)
    seen = rows_per_step(model, lambda: assert_same_hyps(beam_search(model, src, cfg), single))
    if engine == "compiled" and use_cache:  # one graph for every step: each sentence's rows stay to the end
        assert set(seen[1:]) == {8 * 3}
        return
    assert seen[1] == 8 * 3 and min(seen[1:]) < seen[1]  # every beam at the second step, fewer rows later
    handle = model.decoder_layers[0].register_forward_hook(lambda module, args, out: None)  # one's own hook
    try:
        with rows_kept():
            seen = rows_per_step(model, lambda: assert_same_hyps(beam_search(model, src, cfg), single))
            with ThreadPoolExecutor(1) as other:  # another thread's search is not within the block
                theirs = other.submit(rows_per_step, model, lambda: beam_search(model, src, cfg)).result()
    finally:
        handle.remove()
    assert set(seen[1:]) == {8 * 3}  # the hook sees every row where it was, to the end
    assert min(theirs[1:]) < theirs[1]


# --------------------------------------------------------------------------------------------
# 4. beam search escapes greedy's trap
# --------------------------------------------------------------------------------------------

A, B = 3, 4
TRAP = {
    (): {A: 0.6, B: 0.4},  # greedy takes A ...
    (A,): {5: 0.4, 6: 0.3, EOS: 0.3},  # ... whose continuations are all poor
    (A, 5): {EOS: 1.0},
    (A, 6): {EOS: 1.0},
    (B,): {EOS: 1.0},  # while B ends at once with certainty
}


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_beats_greedy_on_trap(use_cache):
    model = TableModel(TRAP)
    src = torch.tensor([[5, 6, EOS]])
    greedy = greedy_search(model, src, DecodeConfig(beam_size=1, max_len_a=0, max_len_b=5, use_cache=use_cache))[0]
    beam = beam_search(
        model, src, DecodeConfig(beam_size=2, max_len_a=0, max_len_b=5, len_penalty=0.0, use_cache=use_cache)
    )[0]
    # By hand: greedy = log 0.6 + log 0.4 + log 1; the best sequence is B EOS = log 0.4.
    assert greedy.tokens == [A, 5]
    assert greedy.score == pytest.approx(math.log(0.6) + math.log(0.4), abs=1e-5)
    assert beam.tokens == [B]
    assert beam.score == pytest.approx(math.log(0.4), abs=1e-5)
    assert model.logprob(beam.tokens) > model.logprob(greedy.tokens)
    assert beam.score > greedy.score


# --------------------------------------------------------------------------------------------
# 5. length limits
# --------------------------------------------------------------------------------------------

# Never ends on its own: EOS has probability 1e-9 unless the length limit forces it.
NEVER_ENDS = {6: 0.4, 7: 0.35, 8: 0.25 - 1e-9, EOS: 1e-9}


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("a,b,max_positions", [(1.5, 1, 64), (0.0, 3, 64), (0.0, 0, 64), (2.0, 50, 6)])
def test_length_limit_is_reached_exactly(beam_size, a, b, max_positions):
    model = TableModel({}, default=NEVER_ENDS, max_positions=max_positions)
    lengths = [1, 2, 3, 5]  # non-pad source tokens
    src = torch.full((len(lengths), max(lengths)), PAD)
    for i, n in enumerate(lengths):
        src[i, :n] = 5
    hyps = generate(model, src, DecodeConfig(beam_size=beam_size, max_len_a=a, max_len_b=b))
    for n, h in zip(lengths, hyps):
        allowed = max(1, min(math.floor(a * n + b), max_positions - 1))  # output tokens, EOS included
        assert len(h.tokens) == allowed - 1
        assert EOS not in h.tokens and PAD not in h.tokens
        assert math.isfinite(h.score)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_cut_at_limit_ends_on_the_last_token_without_eos(beam_size):
    """cut_at_limit: an output at the limit holds as many tokens as the limit, none of them EOS, and its score
    leaves out EOS's log-probability (transformers' generate without forced_eos_token_id)."""
    model = TableModel({}, default=NEVER_ENDS)
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=0, max_len_b=4, len_penalty=0.0, cut_at_limit=True)
    h = generate(model, torch.tensor([[5, EOS]]), cfg)[0]
    assert len(h.tokens) == 4 and EOS not in h.tokens
    assert h.score == pytest.approx(model.logprob(h.tokens) - math.log(NEVER_ENDS[EOS]), abs=1e-5)


def test_decode_config_refuses_a_free_eos_and_a_cut_at_once():
    with pytest.raises(ValueError, match="decode.free_eos_at_limit=true and decode.cut_at_limit=true"):
        DecodeConfig(free_eos_at_limit=True, cut_at_limit=True)


@pytest.mark.parametrize("beam_size", [1, 4])
@pytest.mark.parametrize("a,b", [(0.5, 1), (1.0, 0), (0.0, 4)])
def test_length_limit_real_model(beam_size, a, b):
    model = tiny_model(6, max_positions=8)
    lengths = [2, 3, 5, 7]
    src, _ = padded_batch(lengths, model.cfg.vocab_size, seed=11)
    for use_cache in (True, False):
        hyps = generate(model, src, DecodeConfig(beam_size=beam_size, max_len_a=a, max_len_b=b, use_cache=use_cache))
        for n, h in zip(lengths, hyps):
            assert len(h.tokens) + 1 <= max(1, math.floor(a * n + b))
            assert len(h.tokens) + 1 <= model.cfg.max_positions - 1
            assert EOS not in h.tokens and PAD not in h.tokens
            assert math.isfinite(h.score)


def test_length_limit_clamped_to_max_positions_real_model():
    model = tiny_model(7, max_positions=6)
    src, _ = padded_batch([3, 5], model.cfg.vocab_size)
    for beam_size in (1, 3):
        # A limit of 100 tokens must be clamped, or the decoder would run past its positions.
        hyps = generate(model, src, DecodeConfig(beam_size=beam_size, max_len_a=0, max_len_b=100))
        assert all(len(h.tokens) + 1 <= 5 for h in hyps)


PAD_TRAP = {(): {PAD: 0.6, 5: 0.4}}  # the model (wrongly) likes the padding token; then EOS


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_never_emits_pad(use_cache):
    model = TableModel(PAD_TRAP)
    h = greedy_search(
        model, torch.tensor([[5, EOS]]), DecodeConfig(beam_size=1, max_len_a=0, max_len_b=5, use_cache=use_cache)
    )[0]
    assert PAD not in h.tokens
    # The score must be the log-probability of what is returned (tokens, then EOS).
    assert h.score == pytest.approx(model.logprob(h.tokens), abs=1e-5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_beam_never_emits_pad(use_cache):
    model = TableModel(PAD_TRAP)
    h = beam_search(
        model,
        torch.tensor([[5, EOS]]),
        DecodeConfig(beam_size=2, max_len_a=0, max_len_b=5, len_penalty=0.0, use_cache=use_cache),
    )[0]
    assert PAD not in h.tokens
    assert h.score == pytest.approx(model.logprob(h.tokens), abs=1e-5)


# --------------------------------------------------------------------------------------------
# 6. length penalty
# --------------------------------------------------------------------------------------------

S, L = 3, 4
# Short: S EOS, log-prob log 0.55 (-0.598), per token -0.299.
# Long:  L 7 8 EOS, log-prob log 0.45 (-0.799), per token -0.200.
LEN_TABLE = {(): {S: 0.55, L: 0.45}, (S,): {EOS: 1.0}, (L,): {7: 1.0}, (L, 7): {8: 1.0}, (L, 7, 8): {EOS: 1.0}}


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize(
    "style,alpha,winner",
    [
        ("fairseq", 0.0, [S]),
        ("fairseq", 1.0, [L, 7, 8]),
        ("gnmt", 0.0, [S]),
        ("gnmt", 1.0, [S]),
        ("gnmt", 3.0, [L, 7, 8]),
    ],
)
def test_length_penalty_picks_hypothesis(use_cache, style, alpha, winner):
    model = TableModel(LEN_TABLE)
    cfg = DecodeConfig(
        beam_size=2, max_len_a=0, max_len_b=8, len_penalty=alpha, len_penalty_style=style, use_cache=use_cache
    )
    hyp = beam_search(model, torch.tensor([[5, EOS]]), cfg)[0]

    def penalty(n):  # n output tokens, EOS included
        return n**alpha if style == "fairseq" else ((5 + n) / 6) ** alpha

    normed = {tuple(t): model.logprob(t) / penalty(len(t) + 1) for t in ([S], [L, 7, 8])}
    assert max(normed, key=normed.get) == tuple(winner)  # the table does what the test claims
    assert hyp.tokens == winner
    assert hyp.score == pytest.approx(normed[tuple(winner)], abs=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0, 2.0])
def test_length_penalty_values(alpha):
    lengths = [1, 2, 3, 7, 20]
    gnmt = length_penalty(
        torch.tensor(lengths, dtype=torch.float32), DecodeConfig(len_penalty=alpha, len_penalty_style="gnmt")
    )
    fairseq = length_penalty(torch.tensor(lengths), DecodeConfig(len_penalty=alpha, len_penalty_style="fairseq"))
    for n, g, f in zip(lengths, gnmt.tolist(), fairseq.tolist()):
        assert g == pytest.approx(math.pow((5 + n) / 6, alpha), rel=1e-6)
        assert f == pytest.approx(math.pow(n, alpha), rel=1e-6)


# --------------------------------------------------------------------------------------------
# 7. config validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("beam_size", [0, -1])
def test_decode_config_rejects_bad_beam_size(beam_size):
    with pytest.raises(ValueError, match="beam_size"):
        DecodeConfig(beam_size=beam_size)


def test_decode_config_rejects_unknown_len_penalty_style():
    with pytest.raises(ValueError, match="len_penalty_style"):
        DecodeConfig(len_penalty_style="average")
    DecodeConfig(beam_size=1, len_penalty_style="gnmt")  # the valid values are accepted
    DecodeConfig(beam_size=1, len_penalty_style="fairseq")


def test_decode_config_rejects_min_len_below_one():
    with pytest.raises(ValueError, match="min_len"):
        DecodeConfig(min_len=0)


# --------------------------------------------------------------------------------------------
# 8. minimum length, forced lengths and beam order
# --------------------------------------------------------------------------------------------

EARLY_EOS = {(): {EOS: 0.7, 5: 0.3}, (5,): {EOS: 0.6, 6: 0.4}}  # EOS as early as it can be


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("beam_size", [1, 2])
def test_min_len_holds_back_eos(use_cache, beam_size):
    """min_len=3 (EOS included): the model's favourite, an early EOS, is not allowed; the best
    output of 2 tokens + EOS wins, and its score is still the true log-probability."""
    model = TableModel(EARLY_EOS, default={EOS: 0.5, 7: 0.5})
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=0, max_len_b=6, min_len=3, len_penalty=0.0, use_cache=use_cache)
    h = generate(model, torch.tensor([[5, EOS]]), cfg)[0]
    assert h.tokens == [5, 6]
    assert h.score == pytest.approx(model.logprob([5, 6]), abs=1e-5)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_length_limit_wins_over_min_len(beam_size):
    """min_len beyond the length limit cannot be met: the output ends at the limit with EOS."""
    model = TableModel(EARLY_EOS, default={EOS: 0.5, 7: 0.5})
    cfg = DecodeConfig(beam_size=beam_size, max_len_a=0, max_len_b=3, min_len=10, len_penalty=0.0)
    h = generate(model, torch.tensor([[5, EOS]]), cfg)[0]
    assert len(h.tokens) == 2 and math.isfinite(h.score)


@pytest.mark.parametrize("use_cache", [True, False])
def test_min_len_equal_to_max_forces_every_output_length(use_cache):
    """The benchmark's equal-work setting: min_len = max_len_b = N gives N tokens, EOS last."""
    model = tiny_model(3)
    src, _ = padded_batch([4, 6, 2], vocab=16)
    for beam_size in (1, 3):
        cfg = DecodeConfig(beam_size=beam_size, max_len_a=0, max_len_b=7, min_len=7, use_cache=use_cache)
        assert [len(h.tokens) for h in generate(model, src, cfg)] == [6, 6, 6]


def test_stable_order_keeps_each_parent_in_its_own_slot():
    """stable_order permutes the kept beams so that every parent with a child sees one of its
    children in its own slot (that row's cache is not copied); the set of beams is unchanged."""
    g = torch.Generator().manual_seed(0)
    parent = torch.randint(0, 5, (200, 5), generator=g)
    order = stable_order(parent)
    assert torch.equal(order.sort(dim=1).values, torch.arange(5).expand(200, 5))  # a permutation
    placed = parent.gather(1, order)
    for row, new in zip(parent.tolist(), placed.tolist()):
        assert all(new[p] == p for p in set(row))


def test_beam_search_rejects_beam_wider_than_half_the_vocabulary():
    model = tiny_model(0, vocab=16)
    with pytest.raises(ValueError, match="beam_size=9"):
        beam_search(model, torch.tensor([[5, EOS]]), DecodeConfig(beam_size=9))
