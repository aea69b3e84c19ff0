"""Model.patch_study: each slice's share is what patching that slice by hand restores (a forced pass of
the corrupt source with the clean pass's slice put in its place), whatever the batching; attribution
patching equals real patching where the metric is linear in the activation; bad pairs and settings are
one line each."""

import numpy as np
import pytest
import torch

import qkvmt
from qkvmt.analysis.named_pass import named_pass
from qkvmt.errors import UserError

CLEAN = ["Ein Mann schläft .", "Ein Mann liest ein Buch im Park .", "Der Mann fährt Fahrrad ."]
CORRUPT = ["Eine Frau schläft .", "Eine Frau liest ein Buch im Park .", "Die Frau fährt Fahrrad ."]
NAMES = ["encoder.1.resid_post", "decoder.1.cross.v", "decoder.2.self.k", "decoder.0.ffn.out"]


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="module")
def study(model):
    return model.patch_study(CLEAN, CORRUPT, names=NAMES, batch_size=64)


def by_hand(model, pair: dict, name: str, head: int | None, position: int) -> float:
    """The share one slice restores, patched with a hook of one's own over the pair's forced prefix."""
    tok, t = model.tokenizer, model.transformer
    prefix = [[tok.token_to_id(x) for x in pair["prefix"]]]
    clean_token, corrupt_token = tok.token_to_id(pair["clean_token"]), tok.token_to_id(pair["corrupt_token"])
    at = len(pair["prefix"])

    def metric(run) -> float:
        return float(run.logits[0, at].float().log_softmax(-1)[clean_token])

    clean = named_pass(t, tok, [pair["clean"]], prefix, [name])
    slot = (0, head, position) if head is not None else (0, position)

    def put_back(a, ctx):
        a = a.clone()
        a[slot] = clean.activations[name][slot]
        return a

    patched = named_pass(t, tok, [pair["corrupt"]], prefix, [], {name: [put_back]})
    corrupt = named_pass(t, tok, [pair["corrupt"]], prefix, [])
    assert clean_token != corrupt_token
    return (metric(patched) - metric(corrupt)) / (metric(clean) - metric(corrupt))


def test_each_share_is_what_patching_that_slice_by_hand_restores(model, study):
    r = study.result
    assert r["n"] == len(CLEAN) and r["patched_pairs"] == r["n"] and not r["left_out"]
    rng = np.random.default_rng(0)
    for pair in r["pairs"]:
        for name in NAMES:
            shares = np.asarray(pair["patching"][name])  # (heads or 1, positions)
            expected = len(pair["source_tokens"]) if r["sides"][name] == "source" else len(pair["prefix"]) + 1
            assert shares.shape == (r["heads"][name], expected)
            for _ in range(2):
                h, p = int(rng.integers(shares.shape[0])), int(rng.integers(shares.shape[1]))
                head = h if r["heads"][name] > 1 else None
                assert shares[h, p] == pytest.approx(by_hand(model, pair, name, head, p), abs=2e-4)


def test_batching_changes_no_share(model, study):
    again = model.patch_study(CLEAN, CORRUPT, names=NAMES, batch_size=7)
    for mine, theirs in zip(again.result["pairs"], study.result["pairs"]):
        for name in NAMES:
            np.testing.assert_allclose(mine["patching"][name], theirs["patching"][name], atol=2e-4)
            np.testing.assert_allclose(mine["attribution"][name], theirs["attribution"][name], atol=2e-4)


def test_attribution_equals_patching_where_the_metric_is_linear_in_the_activation(model):
    # post-LN: decoder.out is the last layer's stream, and the logits are a linear map of it
    assert not model.transformer.cfg.norm_first
    r = model.patch_study(CLEAN, CORRUPT, names="decoder.out", metric="logit_diff").result
    for pair in r["pairs"]:
        np.testing.assert_allclose(pair["attribution"]["decoder.out"], pair["patching"]["decoder.out"], atol=1e-3)
        assert pair["patching"]["decoder.out"][0][-1] == pytest.approx(1.0, abs=1e-4)  # the metric's own row
    assert r["correlation"] == pytest.approx(1.0, abs=1e-4)


def test_attribution_runs_real_patching_on_the_pairs_it_checks(model):
    r = model.patch_study(CLEAN, CORRUPT, names="decoder.*.cross.v", method="attribution", check=1).result
    assert r["patched_pairs"] == 1 and "patching" in r["pairs"][0] and "patching" not in r["pairs"][1]
    assert r["heat"]["from"] == "attribution" and r["correlation"] is not None


def test_bad_pairs_and_settings_are_one_line_each(model):
    with pytest.raises(UserError, match=r"pair 1: 'Ein Mann' splits into \d+ tokens and 'Eine Fraugestalt'"):
        model.patch_study(["Ein Hund .", "Ein Mann"], ["Eine Katze .", "Eine Fraugestalt"])
    r = model.patch_study(
        ["Ein Hund schläft .", "Ein Mann", CLEAN[0]], ["Ein Hund schläft .", "Zwei", CORRUPT[0]], unequal="skip"
    )
    assert r.result["n"] == 1 and set(r.result["left_out"]) == {"0", "1"}
    for kwargs, message in (
        ({"names": "decoder.*.cross.weights"}, "no one position to patch"),
        ({"names": "decoder.*.crosss.v"}, "matches no activation"),
        ({"names": "decoder.0.cross.vv"}, "close names: decoder.0.cross.v"),
        ({"metric": "bleu"}, "metric='bleu': use one of log_prob, logit_diff"),
        ({"method": "guess"}, "method='guess': use one of patching, attribution"),
        ({"unequal": "pad"}, "unequal='pad'"),
        ({"batch_size": 0}, "batch_size"),
    ):
        with pytest.raises(UserError, match=message):
            model.patch_study(CLEAN, CORRUPT, **kwargs)
    with pytest.raises(UserError, match="2 clean and 1 corrupt"):
        model.patch_study(CLEAN[:2], CORRUPT[:1])
    with pytest.raises(UserError, match="no pair left to patch"):
        model.patch_study(["Ein Hund ."], ["Ein Hund ."])
    assert torch.is_inference_mode_enabled() is False
