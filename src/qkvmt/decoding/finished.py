"""The hypotheses beam search has finished, per sentence: K slots each, written with one scatter
a step, and what is left of each sentence that has gone from the batch."""

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # length-normalised log-probability (beam) or the sum of log-probabilities (greedy)


class Finished:
    """The finished hypotheses of beam search over B sentences: K slots a sentence, plus slot K,
    where candidates that are not taken land, so every step writes with one scatter."""

    def __init__(self, b: int, k: int, max_t: int, pad_id: int, device):
        self.k, self.pad_id = k, pad_id
        self.scores = torch.full((b, k + 1), float("-inf"), device=device)
        self.tokens = torch.full((b, k + 1, max_t), pad_id, dtype=torch.long, device=device)
        self.count = torch.zeros(b, dtype=torch.long, device=device)  # (B,) slots filled
        self.ids = torch.arange(b)  # each sentence's place in the batch as it began (sentences may leave)
        self.done: dict[int, Hypothesis] = {}  # the best hypotheses of the sentences that left
        self.first_k = torch.arange(2 * k, device=device) < k

    def add(self, eos: Tensor, normed: Tensor, tokens: Tensor) -> None:
        """Finalise the ending candidates `eos` (B, 2K) that rank among the top K of their sentence,
        while slots last: their length-normalised scores (B, 2K) and their tokens (B, 2K, t), each
        read up to its EOS, if any."""
        k, t = self.k, tokens.size(2)
        take = eos & self.first_k
        rank = take.long().cumsum(dim=1) - 1 + self.count[:, None]  # (B, 2K) slot of each candidate
        take &= rank < k
        slot = torch.where(take, rank, k)
        self.scores.scatter_(1, slot, torch.where(take, normed, float("-inf")))
        self.tokens[:, :, :t].scatter_(1, slot[:, :, None].expand(-1, 2 * k, t), tokens)
        self.count += take.sum(dim=1)

    def merge(self, eos: Tensor, normed: Tensor, tokens: Tensor) -> None:
        """As `add`, but a candidate that scores better than a finished hypothesis takes its slot
        (transformers' beam search without early stopping keeps the best K it has seen)."""
        k, (b, n, t) = self.k, tokens.shape
        scores = torch.cat([self.scores[:, :k], torch.where(eos & self.first_k, normed, float("-inf"))], dim=1)
        new = torch.full((b, n, self.tokens.size(2)), self.pad_id, dtype=tokens.dtype, device=tokens.device)
        new[:, :, :t] = tokens  # (B, 2K, max_t)
        top, index = scores.topk(k, dim=1)  # (B, K): the best K of the kept and the new
        merged = torch.cat([self.tokens[:, :k], new], dim=1)  # (B, 3K, max_t)
        self.tokens[:, :k] = merged.gather(1, index[:, :, None].expand(-1, -1, merged.size(2)))
        self.scores[:, :k] = top
        self.count = torch.isfinite(top).sum(dim=1)

    def add_sentences(self, b: int) -> None:
        """b sentences more, with nothing finished yet, after the others (sentences joining a search)."""
        k, dev = self.k, self.scores.device
        self.scores = torch.cat([self.scores, torch.full((b, k + 1), float("-inf"), device=dev)])
        self.tokens = torch.cat([self.tokens, torch.full((b, *self.tokens.shape[1:]), self.pad_id, device=dev)])
        self.count = torch.cat([self.count, torch.zeros(b, dtype=torch.long, device=dev)])
        self.ids = torch.cat([self.ids, torch.arange(len(self.ids), len(self.ids) + b)])

    def worst(self) -> Tensor:
        """(B,) the worst finished score of each sentence, -inf until it has K."""
        return torch.where(self.count >= self.k, self.scores[:, : self.k].min(dim=1).values, float("-inf"))

    def keep(self, going_on: Tensor, eos_id: int) -> None:
        """Only the sentences where `going_on` (B,) is True go on; the others' best hypotheses are
        kept for `results`."""
        index, gone = going_on.nonzero()[:, 0], (~going_on).nonzero()[:, 0]
        self.done.update(zip(self.ids[gone.cpu()].tolist(), self.best(eos_id, gone)))
        self.select(index)

    def select(self, index: Tensor) -> None:
        """Only sentences `index` stay, nothing kept of the others (whose hypotheses were read already)."""
        self.ids = self.ids[index.cpu()]
        kept = [t.index_select(0, index) for t in (self.scores, self.tokens, self.count)]
        self.scores, self.tokens, self.count = kept

    def results(self, eos_id: int) -> list[Hypothesis]:
        """Every sentence's best finished hypothesis, in the order of the batch as it began."""
        found = self.done | dict(zip(self.ids.tolist(), self.best(eos_id)))
        return [found[i] for i in range(len(found))]

    def best(self, eos_id: int, index: Tensor | None = None) -> list[Hypothesis]:
        """The best finished hypothesis of each sentence here, or of sentences `index` (none finished: empty,
        score -inf)."""
        scores, tokens, count = self.scores, self.tokens, self.count
        if index is not None:
            scores, tokens, count = (t.index_select(0, index) for t in (scores, tokens, count))
        best_score, best = scores[:, : self.k].max(dim=1)
        best_tokens = tokens[torch.arange(best.size(0), device=best.device), best]  # (B, max_t)
        return [
            Hypothesis(until_end(row, eos_id, self.pad_id) if n else [], float(s))
            for row, s, n in zip(best_tokens.tolist(), best_score.tolist(), count.tolist())
        ]


def until_end(tokens: list[int], eos: int, pad: int) -> list[int]:
    """The tokens up to the first EOS or padding, after any padding before them (a search whose
    sentences began at different steps keeps them left-padded; <pad> is never an output token)."""
    out, began = [], False
    for tok in tokens:
        if tok == pad and not began:
            continue
        if tok in (eos, pad):
            break
        began = True
        out.append(tok)
    return out
