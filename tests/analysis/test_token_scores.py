"""Per-token scores: the teacher-forced distribution of each target position, read independently."""

import pytest
import torch

from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.token_scores import score_tokens
from qkvmt.loading import load_model


def test_token_scores_are_the_teacher_forced_distribution(trained_run):
    model, tok, _ = load_model(trained_run["run"] / "checkpoints" / "last.ckpt")
    src = torch.tensor([tok.encode("w1 w2 w3").ids + [2]])
    out = tok.encode("t3 t2 t1").ids + [2]
    tgt = torch.tensor([[1] + out[:-1]])
    with torch.no_grad():
        logits, _ = model(src, tgt)
    dist = torch.distributions.Categorical(logits=logits[0].float())
    scores = score_tokens(logits[0], torch.tensor(out), tok)
    assert [s.token for s in scores] == [tok.id_to_token(i) for i in out]
    torch.testing.assert_close(torch.tensor([s.prob for s in scores]), dist.probs[torch.arange(len(out)), out])
    torch.testing.assert_close(torch.tensor([s.entropy for s in scores]), dist.entropy())
    for s, p in zip(scores, dist.probs):
        assert [q for _, q in s.top] == pytest.approx(sorted(p.tolist(), reverse=True)[:5], rel=1e-5)
        assert s.top[0][0] == tok.id_to_token(int(p.argmax()))
    # The forced pass of a sentence carries them, one per row of its decoder maps.
    sa = forced_attention(model, tok, "w1 w2 w3", "t3 t2 t1")
    assert [s.token for s in sa.token_scores] == sa.out_tokens
    assert [s.prob for s in sa.token_scores] == pytest.approx(
        [s.prob for s in scores], rel=1e-5
    )  # its explicit attention path
