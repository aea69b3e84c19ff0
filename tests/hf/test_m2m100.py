"""M2M100 folders (NLLB's dense models are M2M100 too) imported into qkvmt's blocks, against transformers'
M2M100ForConditionalGeneration with the same random weights: pre-LN layers with final LayerNorms,
fairseq's sinusoidal positions after the padding index, and the target language forced as the first
generated token."""

import pytest
import torch

from qkvmt.model.inputs import build_inputs
from tests.hf.folders import SMALL, ours, randomized, saved
from tests.hf.searches import MAX_LENGTH, check_telling, generated, sources, tokens
from tests.hf.searches import ours as searched

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

VOCAB, BOS, PAD, EOS = 44, 0, 1, 2  # fairseq's layout: <s>, <pad>, </s>, <unk>, ...; the languages last
DE, EN, FR = 41, 42, 43
SOURCES = [[DE, 5, 6, 7, 8, 9, 10, 11], [DE, 12, 4], [DE, 30, 31, 32, 33, 34]]  # a source starts with its language
TARGETS = [[EN, 7, 8, 9], [EN, 1 + 4, 6], [FR, 20]]  # a target too: the token forced first
# transformers would go on after a generated <pad>; qkvmt's search never generates one, so neither does generate here.
GENERATION = dict(bad_words_ids=[[PAD]], forced_eos_token_id=EOS, max_length=MAX_LENGTH, early_stopping=False)
STEER, EOS_BIAS = 10.0, 0.8  # a model that tells searches apart (tests.hf.searches)


def m2m100(tmp_path, activation: str = "relu", tied: bool = True, steer: float = 1.0, **generation):
    config = transformers.M2M100Config(
        vocab_size=VOCAB,
        bos_token_id=BOS,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=EOS,
        activation_function=activation,
        tie_word_embeddings=tied,
        **SMALL,
    )
    # with steer, some outputs reach the length limit, some end before, and beam search differs from greedy
    hf = randomized(
        transformers.M2M100ForConditionalGeneration(config), eos_bias=EOS_BIAS if steer != 1 else 0.0, steer=steer
    )
    return hf, saved(hf, tmp_path / "m2m100", **(GENERATION | generation))


@pytest.mark.parametrize("activation, tied", [("relu", True), ("gelu", True), ("relu", False)])
def test_logits_match_transformers(tmp_path, activation, tied):
    hf, folder = m2m100(tmp_path, activation, tied)
    model, _ = ours(folder)
    c = model.cfg
    assert (c.norm_first, c.sinusoidal_layout, c.bos_id, c.output_bias) == (True, "fairseq", EOS, False)
    x = build_inputs(SOURCES, TARGETS, c.specials)
    with torch.no_grad():
        expected = hf(input_ids=x.src, attention_mask=x.src != PAD, decoder_input_ids=x.tgt_in).logits
        logits, _ = model(x.src, x.tgt_in)
    real = x.tgt_in != PAD  # transformers gives a pad the padding index's position, ours its place
    diff = (logits - expected).abs()[real].max().item()
    assert diff < 1e-4, diff


@pytest.mark.parametrize("forced_eos", [EOS, None], ids=["forced-eos", "no-forced-eos"])
@pytest.mark.parametrize(
    "search",
    [dict(num_beams=1), dict(num_beams=5), dict(num_beams=5, early_stopping=True)],
    ids=["greedy", "beam5", "beam5-early"],
)
def test_search_with_a_forced_language_matches_generate(tmp_path, search, forced_eos):
    """Token for token, and beam search's scores, with and without forced_eos_token_id (hub folders often
    have none), on a model where some outputs reach the length limit and beam search differs from greedy
    (checked first)."""
    hf, folder = m2m100(tmp_path, steer=STEER, forced_eos_token_id=forced_eos, **search)
    src = sources(4, DE - 1, start=[DE])
    expected, scores = generated(hf, src, PAD, EOS, forced_bos_token_id=EN)
    greedy, _ = generated(hf, src, PAD, EOS, forced_bos_token_id=EN, num_beams=1)
    check_telling(greedy, generated(hf, src, PAD, EOS, forced_bos_token_id=EN, num_beams=5)[0], expected)
    model, decode = ours(folder)
    got, got_scores = searched(model, src, decode | {"forced_first_id": EN})
    assert all(row[0] == EN for row in got)
    assert got == tokens(expected, EOS)
    if scores is not None:
        assert got_scores == pytest.approx(scores, abs=1e-5)
