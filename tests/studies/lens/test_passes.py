"""DecoderLens and the logit lens: the decoder reading encoder layer k is the decoder given the
first k layers' output computed by hand, the last depth and the last decoder layer are the model
itself, and the readings nothing stays hooked after."""

import json

import numpy as np
import pytest
import torch

import qkvmt
from qkvmt.decoding.lines import translate_ids
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs
from qkvmt.studies.lens.passes import decoder_layer_outputs, depth_ids, encoder_depth
from qkvmt.text.tokenizer import encode
from tests.analysis.test_trace import close, no_hooks, noisy_model, pair


@pytest.mark.parametrize("norm_first", [False, True])
def test_the_decoder_reading_encoder_layer_k_is_the_decoder_given_those_layers_by_hand(norm_first):
    model = noisy_model(norm_first)
    src, tgt = pair(model)
    with torch.no_grad():
        full, _ = model(src, tgt)
        mask, x = model.source_mask(src), model.src_embed(src)
        for depth, layer in enumerate(model.encoder_layers, start=1):
            x, _ = layer(x, mask)
            by_hand, _, _ = model.decode(tgt, model.encoder_norm(x), mask)
            with encoder_depth(model, depth):
                lensed, _ = model(src, tgt)
            close(lensed, by_hand)
            if depth < len(model.encoder_layers):
                assert not torch.allclose(lensed, full, atol=1e-3)
        close(by_hand, full)  # the last depth is the model
    assert no_hooks(model)


def test_the_logit_lens_reads_each_decoder_layers_output_and_its_last_is_the_model():
    model = noisy_model(norm_first=True)
    src, tgt = pair(model)
    with torch.no_grad():
        outputs = decoder_layer_outputs(model, src, tgt)
        logits, _ = model(src, tgt)
        memory, mask, _ = model.encode(src)
        x = model.tgt_embed(tgt)
        for layer, seen in zip(model.decoder_layers, outputs):
            x, _, _ = layer(x, memory, mask)
            close(seen, x)
    close(model.output(model.decoder_norm(outputs[-1])), logits)
    assert no_hooks(model)


def test_depths_and_top_k_outside_the_model_are_one_line_errors():
    model = noisy_model()
    for depth in (0, 4, True, "2"):
        with pytest.raises(UserError, match=r"the model has encoder layers 1\.\.3"):
            with encoder_depth(model, depth):
                pass
    assert no_hooks(model)


@pytest.fixture(scope="module")
def bundled():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.mark.parametrize("max_tokens", [4096, 12])  # the copies of the lines in one batch; split over several
@pytest.mark.parametrize("beam_size", [1, 5])
def test_one_search_over_every_depth_translates_each_line_as_a_search_per_depth(bundled, max_tokens, beam_size):
    lines = ["Zwei Männer spielen Fußball auf einer Wiese .", "", "Ein Hund rennt .", "Eine Frau mit Hut liest"]
    model, tokenizer = bundled.transformer, bundled.tokenizer
    cfg = bundled.decoding(beam_size=beam_size, max_tokens=max_tokens)
    per_depth = []
    for depth in range(1, len(model.encoder_layers) + 1):
        with encoder_depth(model, depth):
            per_depth.append(translate_ids(model, tokenizer, lines, cfg))
    passes = []
    counting = model.encoder_norm.register_forward_hook(lambda *_: passes.append(1))
    try:
        assert depth_ids(model, tokenizer, lines, cfg) == per_depth
    finally:
        counting.remove()
    assert per_depth[0] != per_depth[-1]  # the depths translate differently: each line read its own
    if max_tokens == 4096:  # every copy fits one batch: one search, where there was one per depth
        assert len(passes) == 1
    assert no_hooks(model)


def test_model_lens_gives_one_translation_per_depth_the_last_the_models_and_saves(bundled, tmp_path):
    sentence = "Zwei Männer spielen Fußball auf einer Wiese ."
    result = bundled.lens(sentence, top_k=2)
    assert len(result.depths) == bundled.transformer.cfg.encoder_layers
    assert result.depths[-1] == bundled.translate([sentence])[0]
    assert result.top_probs.shape == (bundled.transformer.cfg.decoder_layers, len(result.tokens), 2)
    m = bundled.transformer
    x = build_inputs([encode(bundled.tokenizer, [sentence])[0]], [bundled.translate([sentence]).ids[0]], m.cfg.specials)
    with torch.no_grad():
        logits, _ = m(x.src, x.tgt_in)
    own = logits[0].gather(-1, x.tgt_out[0][:, None])
    np.testing.assert_array_equal(result.final_rank[-1], (logits[0] > own).sum(-1).numpy())  # the model's own ranks
    assert np.all(np.diff(result.top_probs, axis=-1) <= 0)
    saved = json.loads((result.save(tmp_path / "lens") / "lens.json").read_text())
    assert [d["translation"] for d in saved["encoder_depths"]] == result.depths
    assert (tmp_path / "lens" / "lens.html").read_text().count("<tr>") == 1 + len(result.top_tokens)
    with pytest.raises(UserError, match="top_k=0"):
        bundled.lens(sentence, top_k=0)
