"""Marian folders imported into qkvmt's blocks, against transformers' MarianMTModel with the same random
weights: the logits of a forced pass, and greedy and beam search token for token."""

import pytest
import torch

from qkvmt.model.inputs import build_inputs
from tests.hf.folders import SMALL, ours, randomized, saved
from tests.hf.searches import MAX_LENGTH, check_telling, generated, sources, tokens
from tests.hf.searches import ours as searched

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

VOCAB, PAD, EOS = 40, 39, 0  # Marian's layout: </s> is 0, <pad> last and the decoder's first token
SOURCES = [[5, 6, 7, 8, 9, 10, 11], [12, 3], [30, 31, 32, 33, 34]]
TARGETS = [[7, 8, 9], [1, 2, 3, 4, 5, 6], [20]]
GENERATION = dict(bad_words_ids=[[PAD]], forced_eos_token_id=EOS, max_length=MAX_LENGTH, early_stopping=False)
STEER, EOS_BIAS = 10.0, 1.1  # a model that tells searches apart (tests.hf.searches)
SHAPES = {
    "swish": dict(activation_function="swish"),
    "relu": dict(activation_function="relu", scale_embedding=True),
    "gelu untied": dict(activation_function="gelu", tie_word_embeddings=False),
    "separate vocabularies": dict(
        activation_function="swish", share_encoder_decoder_embeddings=False, decoder_vocab_size=VOCAB + 7
    ),
}


def marian(tmp_path, shape: str, steer: float = 1.0, **generation):
    config = transformers.MarianConfig(
        vocab_size=VOCAB,
        pad_token_id=PAD,
        decoder_start_token_id=PAD,
        eos_token_id=EOS,
        forced_eos_token_id=EOS,
        **SMALL,
        **SHAPES[shape],
    )
    # some outputs end before the limit; with steer, some reach it and beam search differs from greedy
    hf = randomized(transformers.MarianMTModel(config), eos_bias=1.0 if steer == 1 else EOS_BIAS, steer=steer)
    return hf, saved(hf, tmp_path / "marian", **(GENERATION | generation))


def hf_inputs(pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, SOURCES)) + 1
    ids = torch.tensor([s + [EOS] + [pad] * (width - len(s) - 1) for s in SOURCES])
    return ids, ids != pad


@pytest.mark.parametrize("shape", SHAPES)
def test_logits_match_transformers(tmp_path, shape):
    hf, folder = marian(tmp_path, shape)
    model, _ = ours(folder)
    c = model.cfg
    x = build_inputs(SOURCES, TARGETS, c.specials)
    with torch.no_grad():
        expected = hf(input_ids=x.src, attention_mask=x.src != c.pad_id, decoder_input_ids=x.tgt_in).logits  # (B, T, V)
        logits, _ = model(x.src, x.tgt_in)
    real = x.tgt_in != c.pad_id  # Marian's own decoder pads hold other positions than our right-padded rows
    real[:, 0] = True
    diff = (logits - expected).abs()[real].max().item()
    assert logits.shape == expected.shape
    assert diff < 1e-4, diff


def test_logits_match_transformers_at_d_model_1024_to_position_511(tmp_path):
    """A wide model over 511 positions, where a table computed in float32 had moved the logits by 1.6e-4."""
    wide = SMALL | dict(d_model=1024, encoder_layers=1, decoder_layers=1, max_position_embeddings=512)
    config = transformers.MarianConfig(vocab_size=VOCAB, pad_token_id=PAD, decoder_start_token_id=PAD, **wide)
    hf = randomized(transformers.MarianMTModel(config))
    model, _ = ours(saved(hf, tmp_path / "wide"))
    torch.manual_seed(0)
    src = torch.cat([torch.randint(1, PAD, (2, 510)), torch.full((2, 1), EOS)], dim=1)
    tgt_in = torch.cat([torch.full((2, 1), PAD), torch.randint(1, PAD, (2, 510))], dim=1)
    with torch.no_grad():  # in float64, where only a different table (not rounding) can tell the two apart
        expected = hf.double()(input_ids=src, decoder_input_ids=tgt_in).logits
        logits, _ = model.double()(src, tgt_in)
    assert (logits - expected).abs().max().item() < 1e-9


@pytest.mark.parametrize("forced_eos", [EOS, None], ids=["forced-eos", "no-forced-eos"])
@pytest.mark.parametrize(
    "search",
    [
        dict(num_beams=1),
        dict(num_beams=5),
        dict(num_beams=5, early_stopping=True),
        dict(num_beams=5, length_penalty=0.6),
    ],
    ids=["greedy", "beam5", "beam5-early", "beam5-lp0.6"],
)
def test_search_matches_generate(tmp_path, search, forced_eos):
    """Token for token, and beam search's scores, with and without forced_eos_token_id, on a model where some
    outputs reach the length limit and beam search differs from greedy (checked first)."""
    hf, folder = marian(tmp_path, "swish", steer=STEER, forced_eos_token_id=forced_eos, **search)
    src = sources(1, PAD - 1)
    expected, scores = generated(hf, src, PAD, EOS)
    check_telling(generated(hf, src, PAD, EOS, num_beams=1)[0], generated(hf, src, PAD, EOS, num_beams=5)[0], expected)
    model, decode = ours(folder)
    got, got_scores = searched(model, src, decode)
    assert got == tokens(expected, EOS)
    if scores is not None:
        assert got_scores == pytest.approx(scores, abs=1e-5)


def test_renormalized_beam_search_matches_generate(tmp_path):
    """renormalize_logits=true: generate normalises the scores again once bad_words_ids has taken <pad>'s share,
    which changes beam search's scores (checked against generate without it); qkvmt's search does the same."""
    hf, folder = marian(tmp_path, "swish", steer=STEER, num_beams=5, renormalize_logits=True)
    src = sources(1, PAD - 1)
    expected, scores = generated(hf, src, PAD, EOS)
    plain = generated(hf, src, PAD, EOS, renormalize_logits=False)[1]
    assert min(abs(a - b) for a, b in zip(scores, plain)) > 1e-4
    model, decode = ours(folder)
    got, got_scores = searched(model, src, decode)
    assert got == tokens(expected, EOS)
    assert got_scores == pytest.approx(scores, abs=1e-5)
