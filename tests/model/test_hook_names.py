"""Hook names: every point of a model of E encoder and D decoder layers by the documented grammar,
in the order a forced pass reaches them (each one's hook fires there), globs read part by part,
and an unknown name or a glob that matches nothing is one line saying what to type."""

import fnmatch

import pytest
import torch

from qkvmt.analysis.hooking import hooked
from qkvmt.errors import UserError
from qkvmt.model.hook_names import hook_points, resolved
from tests.analysis.test_trace import no_hooks, noisy_model, pair

E, D = 2, 3
ATTENTION = ("x", "q", "k", "v", "mask", "scores", "weights", "heads", "out")
CROSS = ("x", "y", *ATTENTION[1:])
FFN = ("in", "hidden", "out")


def documented(norm_first: bool) -> list[str]:
    """The names the docs give, in forward order: a block's norm before its sub-layer's own sites
    (pre-LN) or after them (post-LN)."""

    def block(prefix, part, own):
        norm = ("norm",)
        pre, post = (norm, ()) if norm_first else ((), norm)
        return [f"{prefix}.{part}.{site}" for site in ("resid_pre", *pre, *own, *post, "resid_post")]

    names = ["encoder.embed"]
    for i in range(E):
        p = f"encoder.{i}"
        names += [f"{p}.resid_pre", *block(p, "self", ATTENTION), *block(p, "ffn", FFN), f"{p}.resid_post"]
    names += ["encoder.out", "decoder.embed"]
    for i in range(D):
        p = f"decoder.{i}"
        names += [f"{p}.resid_pre", *block(p, "self", ATTENTION), *block(p, "cross", CROSS)]
        names += [*block(p, "ffn", FFN), f"{p}.resid_post"]
    return [*names, "decoder.out", "logits"]


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_the_names_are_the_documented_grammar_and_a_forced_pass_reaches_each_in_that_order(norm_first):
    model = noisy_model(norm_first, encoder_layers=E, decoder_layers=D)
    assert list(hook_points(model)) == documented(norm_first)
    src, tgt = pair(model)
    fired = []

    def record(t, ctx):
        fired.append(ctx.name)

    with hooked(model, {name: [record] for name in hook_points(model)}), torch.no_grad():
        model(src, tgt)
    assert fired == documented(norm_first)  # each point's hook, once, in the order of the names
    assert no_hooks(model)


def part_by_part(pattern: str, names: list[str]) -> list[str]:
    """What a glob means read by hand: as many parts as the pattern, each matching its own; `**.last`
    any name whose last part matches."""
    want = pattern.split(".")
    if want[0] == "**":
        return [n for n in names if fnmatch.fnmatchcase(n.split(".")[-1], ".".join(want[1:]))]
    return [
        n
        for n in names
        if len(n.split(".")) == len(want) and all(fnmatch.fnmatchcase(p, w) for p, w in zip(n.split("."), want))
    ]


@pytest.mark.parametrize("pattern", ["decoder.*.cross.v", "**.weights", "encoder.0.*.*", "*.1.*.norm", "logits"])
def test_a_glob_matches_part_by_part(pattern):
    points = hook_points(noisy_model(encoder_layers=E, decoder_layers=D))
    matched = resolved([pattern], points)[pattern]
    assert matched == part_by_part(pattern, list(points))
    assert matched  # every pattern here stands for something
    if pattern == "decoder.*.cross.v":
        assert len(matched) == D
    if pattern == "**.weights":
        assert len(matched) == E + 2 * D  # every attention's


def test_an_unknown_name_lists_close_ones_and_a_glob_matching_nothing_is_named():
    points = hook_points(noisy_model(encoder_layers=E, decoder_layers=D))
    with pytest.raises(UserError, match=r"'decoder\.1\.cros\.v'.*close names: .*decoder\.1\.cross\.v"):
        resolved(["decoder.1.cros.v"], points)
    with pytest.raises(UserError, match=r"'decoder\.3\.cross\.v'.*close names: .*decoder\.2\.cross\.v"):
        resolved(["decoder.3.cross.v"], points)  # a layer the model lacks
    with pytest.raises(UserError, match=r"'encoder\.\*\.cross\.v' matches no activation"):
        resolved(["encoder.*.cross.v"], points)  # the encoder has no cross-attention
