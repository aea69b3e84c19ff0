"""How sure the model was of each token it produced: the probability of the token, the entropy
of the distribution it was drawn from, and the alternatives it weighed, read from the logits of
a forced pass over the translation (row t predicts tgt_out[t] = y_1 .. y_m </s>)."""

from dataclasses import dataclass

from tokenizers import Tokenizer
from torch import Tensor

from qkvmt.text.tokenizer import target_side

TOP = 5  # alternatives shown per token


@dataclass(frozen=True)
class TokenScore:
    token: str  # the token produced (or forced)
    prob: float  # its probability
    entropy: float  # of the whole distribution, in nats: low when the model had no doubt
    top: tuple[tuple[str, float], ...]  # the TOP most likely tokens and their probabilities, most likely first

    def to_dict(self) -> dict:
        return {"token": self.token, "prob": self.prob, "entropy": self.entropy, "top": [list(t) for t in self.top]}


def score_tokens(logits: Tensor, ids: Tensor, tokenizer: Tokenizer, top: int = TOP) -> list[TokenScore]:
    """logits (T, V) of a forced pass and the ids (T,) it predicted -> one TokenScore per row."""
    logp = logits.float().log_softmax(dim=-1)  # (T, V)
    p = logp.exp()
    entropy = -(p * logp).sum(dim=-1)  # (T,)
    best = p.topk(min(top, p.size(-1)), dim=-1)
    chosen = p.gather(-1, ids[:, None])[:, 0]
    name = target_side(tokenizer).id_to_token  # the rows predict target tokens
    return [
        TokenScore(name(int(i)), float(c), float(h), tuple((name(int(j)), float(q)) for q, j in zip(qs, js)))
        for i, c, h, qs, js in zip(
            ids.tolist(), chosen.tolist(), entropy.tolist(), best.values.tolist(), best.indices.tolist()
        )
    ]
