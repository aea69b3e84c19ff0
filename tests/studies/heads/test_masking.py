"""Masking heads and profiling them."""

import numpy as np
import pytest
import torch

from qkvmt.analysis.trace import attention_modules
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.studies.heads.masking import every_head, masked, profile


@pytest.mark.parametrize("head", [("encoder", 0, 1), ("decoder", 1, 3), ("cross", 1, 0)])
def test_masking_a_head_is_zeroing_its_slice_of_w_o_by_hand(head):
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(vocab_size=40, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64)
    ).eval()
    src, tgt = torch.randint(4, 40, (2, 7)), torch.randint(4, 40, (2, 5))
    tgt[:, 0] = 1
    cfg = DecodeConfig(beam_size=3, max_len_b=6)
    with torch.no_grad(), masked(model, [head]):
        logits = model(src, tgt)[0]
        hyps = generate(model, src, cfg)
    unmasked = model(src, tgt)[0]
    by_hand = Transformer(model.cfg).eval()
    by_hand.load_state_dict(model.state_dict())
    kind, layer, h = head
    module = attention_modules(by_hand, kind)[layer]
    with torch.no_grad():
        module.w_o.weight[:, h * module.d_k : (h + 1) * module.d_k] = 0
        torch.testing.assert_close(logits, by_hand(src, tgt)[0])
        assert [x.tokens for x in hyps] == [x.tokens for x in generate(by_hand, src, cfg)]
    assert not torch.allclose(logits, unmasked)  # it did change something ...
    torch.testing.assert_close(model(src, tgt)[0], unmasked)  # ... and only inside the block
    assert len(every_head(model)) == 3 * 2 * 4


def test_a_head_profile_reads_entropy_eos_punctuation_and_position():
    keys = ["▁a", "▁b", ",", "</s>"]
    previous = np.eye(4, k=-1)
    previous[0, 0] = 1  # the first query has no previous token: it keeps to itself
    uniform = np.full((4, 4), 0.25)
    p = profile([previous], [keys])
    assert p.entropy == pytest.approx(0) and p.offset == -1 and p.offset_share == 0.75 and not p.positional
    assert p.eos_share == 0 and p.punctuation_share == pytest.approx(0.25)  # only query 3 reads ",", none "</s>"
    u = profile([uniform, uniform], [keys, keys], positional=False)
    assert u.entropy == pytest.approx(np.log(4)) and u.eos_share == pytest.approx(0.25) and u.offset is None
    assert profile([np.eye(4)] * 3, [keys] * 3).positional  # always the same position
