"""The typed edits (qkvmt.Swap, Zero, Patch, Knockout) on a model with several layers, non-zero
biases and layer norms far from 1: each does what can be written down from the unedited pass
(known answers), swapping a key-value pair leaves every logit as it was, and swapping keys only
and values only give one output."""

import pytest
import torch

from qkvmt.analysis.edits import Donor, Knockout, Patch, Shape, Swap, Zero, compiled
from qkvmt.analysis.intervention import shape_of
from qkvmt.analysis.trace import edited, trace
from qkvmt.decoding.rows import rows_kept
from qkvmt.decoding.search import beam_search
from qkvmt.errors import UserError
from tests.analysis.test_trace import close, noisy_model, pair
from tests.decoding.test_search import assert_same_hyps, rows_per_step, sentences_finishing_apart


def run(model, src, tgt, *edits, donors=None):
    """The traced forced pass with `edits` compiled for this pair."""
    shape = shape_of(model, src.size(1), tgt.size(1))
    return trace(model, src, tgt, edits=compiled(edits, shape, donors))


@pytest.fixture(scope="module")
def setup():
    model = noisy_model()
    src, tgt = pair(model)
    return model, src, tgt, trace(model, src, tgt)


@pytest.mark.parametrize("kind", ["cross", "encoder"])
@pytest.mark.parametrize("layers", [None, (1,)])
def test_swapping_keys_and_values_together_leaves_every_logit_unchanged(setup, kind, layers):
    model, src, tgt, plain = setup
    both = run(model, src, tgt, Swap(1, 4, "both", kind=kind, layers=layers))
    assert (both.logits - plain.logits).abs().max() <= 1e-5
    keys = run(model, src, tgt, Swap(1, 4, "keys", kind=kind, layers=layers))
    assert (keys.logits - plain.logits).abs().max() > 1e-2  # the swap alone does change the output


@pytest.mark.parametrize("kind", ["cross", "encoder"])
def test_with_rotary_positions_the_swaps_keep_both_identities(kind):
    """The CPU recipes' models rotate the encoder's queries and keys by position: a key is edited as
    the scores use it, rotated, so swapping a key-value pair still changes nothing, and keys only
    still equal values only."""
    model = noisy_model(positions="rotary")
    src, tgt = pair(model)
    plain = trace(model, src, tgt)
    close(run(model, src, tgt, Swap(1, 4, "both", kind=kind)).logits, plain.logits)
    keys = run(model, src, tgt, Swap(1, 4, "keys", kind=kind))
    close(keys.logits, run(model, src, tgt, Swap(1, 4, "values", kind=kind)).logits)
    assert (keys.logits - plain.logits).abs().max() > 1e-2


@pytest.mark.parametrize("layers", [None, (0,), (2,)])
def test_swapping_keys_only_and_values_only_give_one_output_but_different_maps(setup, layers):
    model, src, tgt, plain = setup
    keys = run(model, src, tgt, Swap(1, 4, "keys", layers=layers))
    values = run(model, src, tgt, Swap(1, 4, "values", layers=layers))
    close(keys.logits, values.logits)  # Σ α·v is the same sum either way
    first = (layers or (0,))[0]
    # In the first edited layer the queries are the same in both passes: keys swapped swap the
    # map's columns, values swapped leave it as it was.
    order = list(range(src.size(1)))
    order[1], order[4] = 4, 1
    close(keys["cross", first].weights, plain["cross", first].weights[..., order])
    close(values["cross", first].weights, plain["cross", first].weights)


def test_a_swap_of_some_heads_swaps_their_keys_and_leaves_the_others(setup):
    model, src, tgt, plain = setup
    edited = run(model, src, tgt, Swap(0, 2, "keys", layers=(1,), heads=(0, 3)))
    swapped = plain["cross", 1].k.clone()
    swapped[:, [0, 3], 0], swapped[:, [0, 3], 2] = plain["cross", 1].k[:, [0, 3], 2], plain["cross", 1].k[:, [0, 3], 0]
    close(edited["cross", 1].k, swapped)
    close(edited["cross", 0].k, plain["cross", 0].k)


def test_zeroing_a_heads_values_or_output_silences_its_slice_of_w_os_input(setup):
    model, src, tgt, plain = setup
    d_k = model.cfg.d_model // model.cfg.n_heads
    for what in ("values", "output"):
        edited = run(model, src, tgt, Zero(what, kind="decoder", layers=(2,), heads=(1,)))
        heads = edited["decoder", 2].heads
        assert heads[..., d_k : 2 * d_k].abs().max() == 0
        close(heads[..., :d_k], plain["decoder", 2].heads[..., :d_k])  # the other heads as they were
        close(edited["decoder", 2].weights, plain["decoder", 2].weights)  # where it looks is untouched
        close(edited["decoder", 1].resid_post, plain["decoder", 1].resid_post)  # the layers before too
    assert not torch.allclose(edited.logits, plain.logits)


def test_a_patch_puts_the_donors_values_at_the_positions_and_the_output_follows_them(setup):
    model, src, tgt, plain = setup
    donor_src = src.clone()
    donor_src[0, 2] = 35  # another token at position 2
    donor = trace(model, donor_src, tgt)
    sites = {(k, i, s): getattr(donor[k, i], s) for k in ("cross", "encoder") for i in range(3) for s in "kv"}
    edit = Patch("a donor", "values", positions=(2,), layers=(1,))
    edited = run(model, src, tgt, edit, donors={id(edit): Donor(sites, [2])})
    expected_v = plain["cross", 1].v.clone()
    expected_v[:, :, 2] = donor["cross", 1].v[:, :, 2]
    close(edited["cross", 1].v, expected_v)
    close(edited["cross", 1].weights, plain["cross", 1].weights)  # values move no weight
    b, t = edited["cross", 1].weights.shape[0], edited["cross", 1].weights.shape[2]
    by_hand = (edited["cross", 1].weights @ expected_v).transpose(1, 2).reshape(b, t, -1)  # (B, T, D)
    close(edited["cross", 1].heads, by_hand)


def test_a_knockout_renormalises_that_querys_weights_without_the_key(setup):
    model, src, tgt, plain = setup
    edited = run(model, src, tgt, Knockout(3, 1, layers=(0,)))
    before, after = plain["cross", 0].weights, edited["cross", 0].weights  # (1, H, T, S)
    expected = before.clone()
    expected[:, :, 3, 1] = 0
    expected[:, :, 3] /= 1 - before[:, :, 3, 1, None]
    close(after[:, :, :4], expected[:, :, :4])  # rows after 3 read a decoder changed by it


def test_a_number_names_one_layer_head_or_position_as_a_tuple_of_one_does():
    shape = Shape({"encoder": 3, "decoder": 3, "cross": 3}, heads=4, d_k=4, src_len=7, out_len=5)
    assert compiled([Zero(layers=1, heads=2)], shape).keys() == compiled([Zero(layers=(1,), heads=(2,))], shape).keys()
    donor = Donor({("cross", i, s): torch.zeros(1, 4, 7, 4) for i in range(3) for s in "kv"}, [3])
    one, as_tuple = Patch("x", positions=3), Patch("x", positions=(3,))
    t = torch.ones(1, 4, 7, 4)
    close(
        compiled([one], shape, {id(one): donor})[("cross", 0, "v")](t),
        compiled([as_tuple], shape, {id(as_tuple): donor})[("cross", 0, "v")](t),
    )


def test_edits_outside_the_model_are_one_line_errors_naming_the_range():
    shape = Shape({"encoder": 3, "decoder": 3, "cross": 3}, heads=4, d_k=4, src_len=7, out_len=5)
    for edit, message in [
        (Swap(1, 7), r"Swap.b=7 does not exist: the source tokens are 0..6"),
        (Swap(1, 2, "key"), r"Swap.what='key': use one of keys, values, both"),
        (Swap(1, 2, kind="decoder"), r"Swap.kind='decoder': use one of cross, encoder"),
        (Zero(layers=(3,)), r"Zero.layers=3 does not exist: the cross attention's layers are 0..2"),
        (Zero(heads=(-5,)), r"Zero.heads=-5 does not exist: the heads are 0..3"),
        (Knockout(5, 0), r"Knockout.query=5 does not exist: the output tokens are 0..4"),
        (Knockout(0, 0, heads=(1,)), r"leave heads unset"),
    ]:
        with pytest.raises(UserError, match=message):
            compiled([edit], shape)
    with pytest.raises(UserError, match="is not an edit"):
        compiled([lambda t: t], shape)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Zero(heads=1.5), r"^Zero\.heads=1\.5: give a whole number or a list of whole numbers"),
        (lambda: Zero(layers="12"), r"^Zero\.layers='12': give a whole number or a list"),  # not '1' and '2'
        (lambda: Zero(layers=[0, 1.0]), r"^Zero\.layers=\[0, 1\.0\]: give a whole number or a list"),
        (lambda: Patch("x", positions=True), r"^Patch\.positions=True: give a whole number or a list"),
        (lambda: Swap(1.5, 2), r"^Swap\.a=1\.5: give a whole number$"),
        (lambda: Knockout(0, "1"), r"^Knockout\.key='1': give a whole number$"),
        (lambda: Swap(1, 2, 3), r"^Swap\.what=3: give text$"),
        (lambda: Swap(3, 3), r"^Swap\.a=Swap\.b=3: pick two different source tokens to swap$"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_as_the_edit_is_made(make, message):
    with pytest.raises(UserError, match=message):
        make()


def test_a_swap_of_one_token_with_itself_is_refused_however_it_is_named():
    shape = Shape({"encoder": 3, "decoder": 3, "cross": 3}, heads=4, d_k=4, src_len=7, out_len=5)
    with pytest.raises(UserError, match=r"^Swap\.a=6 and Swap\.b=-1 are the same source token \(6\): pick two"):
        compiled([Swap(6, -1)], shape)
    assert compiled([Swap(5, -1)], shape)  # the last two tokens: a swap


@pytest.mark.parametrize("edit", [Swap(0, 1), Zero(layers=0, heads=1), Knockout(1, 0, layers=0)], ids=repr)
def test_a_search_under_a_typed_edit_lets_done_sentences_leave_the_batch(edit):
    model, src, cfg, _ = sentences_finishing_apart(early_stopping=True, use_cache=False)
    with edited(model, compiled([edit], shape_of(model, src.size(1), None))):
        with rows_kept():
            kept = beam_search(model, src, cfg)
        seen = rows_per_step(model, lambda: assert_same_hyps(beam_search(model, src, cfg), kept))
    assert min(seen[1:]) < seen[1]  # the same edit does the same to every row: rows may leave
