"""M2M100 folders (NLLB's dense models are M2M100 too) imported into qkvmt's blocks, against transformers'
M2M100ForConditionalGeneration with the same random weights: pre-LN layers with final LayerNorms,
fairseq's sinusoidal positions after the padding index, and the target language forced as the first
generated token."""

import pytest
import torch

from qkvmt.decoding.search import DecodeConfig, generate
from qkvmt.model.inputs import build_inputs
from tests.hf.folders import SMALL, ours, randomized, saved

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

VOCAB, BOS, PAD, EOS = 44, 0, 1, 2  # fairseq's layout: <s>, <pad>, </s>, <unk>, ...; the languages last
DE, EN, FR = 41, 42, 43
SOURCES = [[DE, 5, 6, 7, 8, 9, 10, 11], [DE, 12, 4], [DE, 30, 31, 32, 33, 34]]  # a source starts with its language
TARGETS = [[EN, 7, 8, 9], [EN, 1 + 4, 6], [FR, 20]]  # a target too: the token forced first
# transformers would go on after a generated <pad>; qkvmt's search never generates one, so neither does generate here.
GENERATION = dict(bad_words_ids=[[PAD]], forced_eos_token_id=EOS, max_length=14, early_stopping=False)


def m2m100(tmp_path, activation: str = "relu", tied: bool = True, **generation):
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
    hf = randomized(transformers.M2M100ForConditionalGeneration(config))
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


@pytest.mark.parametrize(
    "search",
    [dict(num_beams=1), dict(num_beams=5), dict(num_beams=5, early_stopping=True)],
    ids=["greedy", "beam5", "beam5-early"],
)
@pytest.mark.parametrize("language", [EN, FR])
def test_search_with_a_forced_language_matches_generate(tmp_path, search, language):
    hf, folder = m2m100(tmp_path, **search)
    model, decode = ours(folder)
    width = max(map(len, SOURCES)) + 1
    src = torch.tensor([s + [EOS] + [PAD] * (width - len(s) - 1) for s in SOURCES])
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=src != PAD, forced_bos_token_id=language)
    expected = [[t for t in row[1:] if t != PAD] for row in out.tolist()]
    expected = [row[: row.index(EOS)] if EOS in row else row for row in expected]
    got = [
        h.tokens
        for h in generate(
            model,
            build_inputs(SOURCES, None, model.cfg.specials).src,
            DecodeConfig(**(decode | {"forced_first_id": language})),
        )
    ]
    assert all(row[0] == language for row in got)
    assert got == expected
