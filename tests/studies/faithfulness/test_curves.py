"""Faithfulness: on a model where one source token alone decides the prediction, a ranking that
puts it first deletes what matters (its AOPC is the drop that token's deletion causes) and keeps
what suffices, its reversal and random orders do not; deletion writes <pad> and never removes
</s>; means and intervals are over sentences."""

import math

import numpy as np
import pytest
import torch

from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.studies.faithfulness.curves import (
    FRACTIONS,
    Reading,
    SentenceScores,
    Variants,
    cross_signals,
    cuts,
    deletion_curves,
    forced_inputs,
    ranking,
    readings,
    score,
    summarize,
)
from qkvmt.text.sinks import SINKS

DECISIVE = 15  # the token that decides every prediction
OTHERS = [2, *range(4, DECISIVE)]  # </s> and every other ordinary token


def decisive_model(seed: int = 0) -> Transformer:
    """A 2+2-layer model (random biases and layer norms) whose every prediction depends on one
    source token, DECISIVE, and on no other:

    * the encoder mixes no tokens (its self-attention output weights are zero; rotary positions,
      so each token's memory vector depends on its id alone);
    * every cross-attention projects out the span of the other tokens' memory vectors before its
      keys and values, so their values are 0 and their keys equal, and its query (a constant)
      puts a score 12 higher on DECISIVE's key: the heads read DECISIVE's value alone when it is
      there, and nothing but their bias when it is not."""
    torch.manual_seed(seed)
    model = Transformer(
        ModelConfig(
            vocab_size=16,
            d_model=32,
            n_heads=4,
            encoder_layers=2,
            decoder_layers=2,
            ffn_dim=64,
            positions="rotary",
            tie_embeddings=False,
        )
    ).eval()
    d = model.cfg.d_model
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.5)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
        for layer in model.encoder_layers:
            layer.self_attn.w_o.weight.zero_()
        memory = model.encode(torch.arange(16)[None])[0][0]  # (16, D): each token's memory vector
        basis, _ = torch.linalg.qr((memory[OTHERS[1:]] - memory[OTHERS[0]]).T)  # (D, 12)
        keep = torch.eye(d) - basis @ basis.T  # projects the others' differences out
        for layer in model.decoder_layers:
            attn = layer.cross_attn
            w, b = attn.w_qkv.weight, attn.w_qkv.bias
            for block, scale in ((1, 1.0), (2, 20.0)):  # W_K, W_V: values large beside the residual
                rows = slice(block * d, (block + 1) * d)
                w[rows] = scale * w[rows] @ keep
                b[rows] = -w[rows] @ memory[OTHERS[0]] + (b[rows] if block == 1 else 0)
            key = (w[d : 2 * d] @ (memory[DECISIVE] - memory[OTHERS[0]])).view(attn.n_heads, attn.d_k)
            w[:d] = 0
            b[:d] = (12 * math.sqrt(attn.d_k) * key / key.pow(2).sum(-1, keepdim=True)).flatten()
        model.output.weight.mul_(4)  # sharper predictions: what the token adds moves log p clearly
    return model


def greedy_target(model: Transformer, src: list[int], steps: int = 4) -> list[int]:
    """The model's own ordinary tokens after src: each is what the decisive token made likeliest."""
    tgt = []
    for _ in range(steps):
        x = forced_inputs(model, src, tgt)
        logits = model(x.src, x.tgt_in)[0][0, -1]
        logits[:4] = -math.inf
        tgt.append(int(logits.argmax()))
    return tgt


def log_p(model: Transformer, src: list[int], tgt: list[int], row: int) -> float:
    x = forced_inputs(model, src, tgt)
    with torch.no_grad():
        return model(x.src, x.tgt_in)[0][0, row].log_softmax(-1)[x.tgt_out[0, row]].item()


def oracle(model, src: list[int], tgt: list[int]) -> np.ndarray:
    """A (rows, cols) map that ranks DECISIVE first at every row."""
    m = np.zeros((len(tgt) + 1, len(src) + 1))
    m[:, src.index(DECISIVE)] = 1
    return m


def test_a_ranking_with_the_deciding_token_first_deletes_what_matters_and_keeps_what_suffices():
    model = decisive_model()
    src = [5, 9, 4, DECISIVE, 7, 12, 6, 10, 8, 11]
    tgt = greedy_target(model, src)
    rows = [0, 2, 3]
    without = [t if t != DECISIVE else model.cfg.pad_id for t in src]
    drops = np.array([log_p(model, src, tgt, r) - log_p(model, without, tgt, r) for r in rows])
    assert (drops > 0.5).all()  # the construction: each prediction needs the token
    others = [t if t == DECISIVE else model.cfg.pad_id for t in src]
    assert max(abs(log_p(model, src, tgt, r) - log_p(model, others, tgt, r)) for r in rows) < 1e-3  # ... and only it

    x = forced_inputs(model, src, tgt)
    rng = np.random.default_rng(0)
    orders = np.stack([rng.permutation(len(src)) for _ in range(20)])
    s = score(model, x, {Reading("oracle", None): oracle(model, src, tgt)}, rows, FRACTIONS, orders)
    (deletion,) = s.drops["deletion"].values()
    np.testing.assert_allclose(
        deletion, np.repeat(drops[:, None], len(FRACTIONS), 1), atol=1e-4
    )  # every level deletes it
    reversed_, sufficiency = (
        s.drops["reversed"][Reading("oracle", None)],
        s.drops["sufficiency"][Reading("oracle", None)],
    )
    assert np.abs(reversed_).max() < 1e-3 and np.abs(sufficiency).max() < 1e-3
    # a random order deletes it at level f in about f of the draws
    in_top = np.array([[DECISIVE in np.array(src)[o[:k]] for k in s.ks] for o in orders])  # (draws, levels)
    np.testing.assert_allclose(s.random, drops[:, None, None] * in_top[None], atol=1e-3)
    assert deletion.mean() > s.random.mean() + 0.3 * drops.mean() > reversed_.mean()


def test_attention_weights_of_that_model_find_the_token_as_the_oracle_does():
    model = decisive_model(seed=1)
    src, rows = [DECISIVE, 4, 9, 12, 5, 6], [1, 3]
    tgt = greedy_target(model, src)
    x = forced_inputs(model, src, tgt)
    maps = readings(model, x, ["weights"])
    assert list(maps) == [Reading("weights", 0), Reading("weights", 1)]
    no_random = np.empty((0, len(src)), dtype=np.int64)
    by_weights = score(model, x, maps, rows, FRACTIONS, no_random)
    by_oracle = score(model, x, {Reading("oracle", None): oracle(model, src, tgt)}, rows, FRACTIONS, no_random)
    for reading, m in maps.items():
        assert (m[rows, : len(src)].argmax(-1) == src.index(DECISIVE)).all()
        np.testing.assert_allclose(
            by_weights.drops["deletion"][reading], by_oracle.drops["deletion"][Reading("oracle", None)], atol=1e-4
        )  # the other tokens, in another order, change nothing


def test_the_weights_without_their_sinks_rank_the_other_tokens_as_the_weights_do_and_punctuation_last():
    model = decisive_model(seed=2)
    src, rows = [5, DECISIVE, 6, 7, 8, 9], [0, 2]
    tokens = ["▁a", "▁b", ",", "▁c", "▁d", ".", "</s>"]  # the source's names: a comma and a full stop
    tgt = greedy_target(model, src)
    x = forced_inputs(model, src, tgt)
    maps = readings(model, x, ["weights"], tokens=tokens)
    sink_free = [Reading("weights", layer, SINKS) for layer in (0, 1)]
    assert list(maps) == [Reading("weights", 0), Reading("weights", 1), *sink_free]
    assert sink_free[1].label == "weights layer 1 without </s> and punctuation"
    n, punctuation = len(src), [2, 5]
    for reading in sink_free:
        w = maps[Reading("weights", reading.layer)]
        kept = [c for c in range(n) if c not in punctuation]
        for t in range(len(tgt) + 1):
            cut = np.delete(w[t], [*punctuation, n])  # the row without the sinks' columns
            np.testing.assert_allclose(maps[reading][t, kept], cut * w[t].sum() / cut.sum(), rtol=1e-6)
            by_cut = [kept[i] for i in sorted(range(len(kept)), key=lambda i: -cut[i])]
            assert ranking(maps[reading][t, :n]).tolist() == by_cut + punctuation
    # Scored as a map that ranks the same way: its deletions are those of that ranking.
    by_rank = np.zeros_like(maps[sink_free[0]])
    for t in range(len(by_rank)):
        by_rank[t, ranking(maps[sink_free[0]][t, :n])] = np.arange(n, 0, -1)
    no_random = np.empty((0, n), dtype=np.int64)
    got = score(model, x, {sink_free[0]: maps[sink_free[0]]}, rows, FRACTIONS, no_random).drops
    want = score(model, x, {Reading("rank", None): by_rank}, rows, FRACTIONS, no_random).drops
    for test in got:
        np.testing.assert_array_equal(got[test][sink_free[0]], want[test][Reading("rank", None)])


def test_deletion_writes_pad_in_place_and_never_removes_the_end_of_sentence():
    src = torch.tensor([[7, 8, 9, 10, 2]])  # x_1 .. x_4 </s>
    v = Variants(4)
    assert v.deleting([2, 0]) == 1 and v.keeping([1, 3]) == 1  # the same source: one row
    assert v.keeping([]) == 2 and v.deleting([0, 1, 2, 3]) == 2 and v.deleting([]) == 0
    assert v.sources(src, 0).tolist() == [[7, 8, 9, 10, 2], [0, 8, 0, 10, 2], [0, 0, 0, 0, 2]]


def test_a_level_of_one_deletes_every_token_but_the_end_of_sentence():
    model = decisive_model()
    src = [5, DECISIVE, 9]
    tgt = greedy_target(model, src, steps=2)
    x = forced_inputs(model, src, tgt)
    s = score(
        model, x, {Reading("oracle", None): oracle(model, src, tgt)}, [0, 1], [1.0], np.empty((0, 3), dtype=np.int64)
    )
    assert s.ks == [3]
    expected = [log_p(model, src, tgt, r) - log_p(model, [0, 0, 0], tgt, r) for r in (0, 1)]
    np.testing.assert_allclose(s.drops["deletion"][Reading("oracle", None)][:, 0], expected, atol=1e-4)


def test_levels_delete_the_ceiling_of_their_share():
    assert cuts(10, [0.1, 0.3, 0.5, 1.0]) == [1, 3, 5, 10]  # 0.3 × 10 is 3, not 3.0000000000000004 -> 4
    assert cuts(13, FRACTIONS) == [2, 3, 4, 6, 7]
    assert cuts(1, FRACTIONS) == [1] * 5


def test_means_and_intervals_are_over_sentences_each_averaged_over_its_rows_first():
    r = Reading("weights", 1)
    rng = np.random.default_rng(0)

    def sentence(n_rows: int) -> SentenceScores:
        drops = {test: {r: rng.normal(size=(n_rows, 2))} for test in ("deletion", "reversed", "sufficiency")}
        return SentenceScores(list(range(n_rows)), [1, 2], drops, rng.normal(size=(n_rows, 3, 2)))

    sentences = [sentence(3), sentence(1), sentence(2)]
    out = summarize(sentences)
    (row,) = out["readings"]
    assert (row["signal"], row["layer"], row["label"]) == ("weights", 1, "weights layer 1")
    per_sentence = [s.drops["deletion"][r].mean() for s in sentences]  # a long sentence counts once
    mean, sd = np.mean(per_sentence), np.std(per_sentence, ddof=1)
    assert row["deletion_aopc"]["mean"] == pytest.approx(mean) and row["deletion_aopc"]["n"] == 3
    assert row["deletion_aopc"]["ci95"] == pytest.approx(
        [mean - 1.96 * sd / math.sqrt(3), mean + 1.96 * sd / math.sqrt(3)]
    )
    assert out["random_aopc"]["mean"] == pytest.approx(np.mean([s.random.mean() for s in sentences]))
    assert summarize(sentences[:1])["random_aopc"]["ci95"] is None  # one sentence: no interval


def test_a_pass_cut_after_the_last_scored_row_reads_the_same_maps():
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(vocab_size=30, d_model=16, n_heads=2, encoder_layers=2, decoder_layers=2, ffn_dim=32)
    ).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    src, tgt = [5, 9, 11, 4, 20], [7, 8, 12, 25, 6, 9]
    names = cross_signals()
    full, cut = (
        readings(model, forced_inputs(model, src, tgt), names),
        readings(model, forced_inputs(model, src, tgt[:3]), names),
    )
    assert list(full) == list(cut) and {r.signal for r in full} == set(names)
    for reading in full:  # rows 0..2 predict tgt[0..2]: the causal decoder reads no later token
        np.testing.assert_allclose(cut[reading][:3], full[reading][:3], rtol=1e-4, atol=1e-6, err_msg=reading.label)
    some = readings(model, forced_inputs(model, src, tgt), names, rows=[1, 4])  # what faithfulness asks for
    for reading in full:
        np.testing.assert_allclose(
            some[reading][[1, 4]], full[reading][[1, 4]], rtol=1e-4, atol=1e-6, err_msg=reading.label
        )
        others = some[reading][[0, 2, 3, 5, 6]]
        if reading.layer is None:  # a gradient signal computes the rows asked for alone
            assert np.isnan(others).all(), reading.label
        else:
            np.testing.assert_array_equal(others, full[reading][[0, 2, 3, 5, 6]], err_msg=reading.label)


def test_one_target_rows_deletion_curves_are_the_scores_of_that_row():
    model = decisive_model()
    src = [5, 9, DECISIVE, 7]
    tgt = greedy_target(model, src, steps=3)
    curves = deletion_curves(model, src, tgt, 1, signals=["weights"], draws=4)
    assert curves["fractions"] == list(FRACTIONS) and curves["ks"] == cuts(4, FRACTIONS)
    x = forced_inputs(model, src, tgt)
    s = score(model, x, readings(model, x, ["weights"]), [1], FRACTIONS, np.empty((0, 4), dtype=np.int64))
    assert curves["curves"] == {r.label: s.drops["deletion"][r][0].tolist() for r in s.drops["deletion"]}
    assert len(curves["random"]) == len(FRACTIONS)
    with pytest.raises(ValueError, match="row 9"):
        deletion_curves(model, src, tgt, 9)
