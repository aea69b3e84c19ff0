"""Beam search that sentences join while it runs (continuous batching, as `qkvmt serve` uses it).

A sentence joins at the next step and leaves as soon as it is done, with its best hypothesis,
whatever the others do. Every sentence's beams advance in one decoder pass and one bookkeeping
(qkvmt.decoding.search's `advance`), each at its own step: its token count is a tensor, its rows'
tokens are kept left-padded (<pad> is never an output token), and the rules of a step (min_len,
the forced first token, the length limit) read each row's own length. In the decoder, a row's
history starts at the cache slot where it joined: the decoder reads each row's own positions and
masks the slots before its start (DecoderState.start); each sentence's memory is padded to the
longest, under the source mask.

A sentence joins with its K beams, all but the first at -inf, where `beam_search` starts from one
row a sentence: every sentence is then K rows at every step, as cross-attention's sharing of a
sentence's memory by its beams needs; the -inf beams never win a finite candidate, so a sentence's
translation is the one `beam_search` gives it (tested).
"""

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.functional import pad

from qkvmt.decoding.finished import Finished, Hypothesis
from qkvmt.decoding.search import PRUNE_SHARE, DecodeConfig, advance, check_beam_size
from qkvmt.decoding.stepper import Rules, max_lengths
from qkvmt.model.transformer import Transformer


@dataclass
class Done:
    tag: object  # the name `join` was given for the sentence
    hypothesis: Hypothesis


class RunningSearch(Rules):
    """Beam search of `cfg` over the sentences that `join` it; each `step` advances all of them by a token
    in one pass of the decoder and returns those done. To run under torch.inference_mode, on a model
    without hooks (qkvmt.decoding.lines.running_lines checks)."""

    def __init__(self, model: Transformer, cfg: DecodeConfig):
        check_beam_size(cfg.beam_size, model.cfg.target_vocab_size)
        dev = next(model.parameters()).device
        super().__init__(model.cfg, torch.zeros(0, dtype=torch.long, device=dev), cfg)
        self.model, self.cfg, self.device = model, cfg, dev
        self.clear()

    def clear(self) -> None:
        """No sentence in it (the next to join start afresh)."""
        model, cfg, dev = self.model, self.cfg, self.device
        self.limit = torch.zeros(0, dtype=torch.long, device=dev)  # (B*K,) the rules' own: sentence_limit a row
        self.tags: list = []  # (B,) each sentence's name
        self.tokens = torch.zeros(0, 0, dtype=torch.long, device=dev)  # (B*K, T) each row's so far, left-padded
        self.steps = torch.zeros(0, 1, dtype=torch.long, device=dev)  # (B, 1) each sentence's tokens so far
        self.sentence_limit = torch.zeros(0, dtype=torch.long, device=dev)  # (B,) output tokens allowed
        self.scores = torch.zeros(0, cfg.beam_size, device=dev)  # (B, K)
        self.active = torch.zeros(0, dtype=torch.bool, device=dev)  # (B,) not yet done
        self.finished = Finished(0, cfg.beam_size, model.cfg.max_positions, model.cfg.pad_id, dev)
        self.state, self.src_mask = None, None  # the decoder's; the sources' mask (B, 1, 1, S)
        self.logits: Tensor | None = None  # this step's, (B*K, V)

    def __len__(self) -> int:
        """The sentences not yet done."""
        return int(self.active.sum())

    def join(self, src: Tensor, tags: list) -> None:
        """Sentences `src` (B', S') of ids, named `tags`, join the search at its next step."""
        model, k, b, pad_id = self.model, self.cfg.beam_size, len(tags), self.model.cfg.pad_id
        memory, src_mask, _ = model.encode(src)
        limit = max_lengths(src_mask.flatten(1).sum(-1), self.cfg, model.cfg.max_positions)  # (B',)
        scores = torch.zeros(b, k, device=self.device)
        scores[:, 1:] = float("-inf")  # one live beam a sentence, as beam_search's first step has
        keep = None
        if self.state is None:
            self.state, self.src_mask = model.new_state(), src_mask
        else:
            if not self.active.all():  # the sentences done leave in the copy that makes room for these
                live = self.active.nonzero()[:, 0]
                keep = ((live[:, None] * k + torch.arange(k, device=self.device)).view(-1), live)
                self.keep_sentences(live)
                self.tokens = self.tokens[keep[0]]
            s = max(self.src_mask.size(-1), src_mask.size(-1))
            self.src_mask = torch.cat([padded(self.src_mask, s), padded(src_mask, s)])
        self.state.add_rows(b * k, model.memory_keys_values(memory), self.device, keep)
        self.tags += list(tags)
        self.tokens = torch.cat([self.tokens, self.tokens.new_full((b * k, self.tokens.size(1)), pad_id)])
        self.steps = torch.cat([self.steps, self.steps.new_zeros(b, 1)])
        self.sentence_limit = torch.cat([self.sentence_limit, limit])
        self.limit = self.sentence_limit.repeat_interleave(k)  # a beam never leaves its sentence's rows
        self.scores = torch.cat([self.scores, scores])
        self.active = torch.cat([self.active, torch.ones(b, dtype=torch.bool, device=self.device)])
        self.finished.add_sentences(b)
        if keep is not None:
            self.trim()

    def keep_sentences(self, index: Tensor) -> None:
        """Only sentences `index` stay, as far as their bookkeeping goes (their rows and the decoder's state
        are the caller's to narrow)."""
        self.finished.select(index)
        self.tags = [self.tags[i] for i in index.tolist()]
        self.steps, self.sentence_limit, self.active, self.scores = (
            x[index] for x in (self.steps, self.sentence_limit, self.active, self.scores)
        )
        self.limit = self.sentence_limit.repeat_interleave(self.cfg.beam_size)
        self.src_mask = self.src_mask.index_select(0, index)

    def __call__(self, prefix: Tensor) -> Tensor:
        """This step's log-probabilities under the rules, each row at its own length (`advance` calls it)."""
        return self.scored(self.logits, self.steps[:, 0].repeat_interleave(self.cfg.beam_size) + 1)

    def step(self) -> list[Done]:
        """One token more for every sentence not done; those done at it, with their best hypotheses."""
        c, k = self.model.cfg, self.cfg.beam_size
        bos = self.tokens.new_full((self.tokens.size(0), 1), c.bos_id)
        ids = (
            torch.where(self.steps.repeat_interleave(k, dim=0) > 0, self.tokens[:, -1:], bos)
            if self.tokens.size(1)
            else bos
        )
        # The cross-attention caches hold every sentence's keys and values: the memory is not read again.
        no_memory = torch.zeros(self.src_mask.size(0), 0, c.d_model, device=self.device)
        logits, _, _ = self.model.decode(ids, no_memory, self.src_mask, self.state, last_only=True)
        self.logits = logits[:, -1]
        prefix = torch.cat([bos, self.tokens], dim=1)  # (B*K, T+1), as `advance` reads a prefix
        was_active = self.active.clone()
        keep_scores, keep, beam, token = advance(
            self, prefix, self.scores, k, self.sentence_limit, self.active, self.finished, self.cfg, self.steps
        )
        done_now = (was_active & ~self.active).nonzero()[:, 0]
        done = [Done(self.tags[i], h) for i, h in zip(done_now.tolist(), self.finished.best(c.eos_id, done_now))]
        b, live = self.active.numel(), len(self)
        rows_of = torch.arange(b, device=self.device)  # the sentences that go on
        if b - live >= max(1, b // PRUNE_SHARE):  # the sentences done leave: no rows spent on them
            rows_of = self.active.nonzero()[:, 0]
            self.keep_sentences(rows_of)
            keep_scores, keep, beam, token = (x.index_select(0, rows_of) for x in (keep_scores, keep, beam, token))
            self.state.keep_sentences(rows_of)
        src_rows = (rows_of[:, None] * k + beam.gather(1, keep)).view(-1)  # (B*K,)
        self.scores = keep_scores.masked_fill(~self.active[:, None], float("-inf"))
        self.tokens = torch.cat([self.tokens.index_select(0, src_rows), token.gather(1, keep).view(-1, 1)], dim=1)
        self.steps += 1
        self.state.reorder_beams(src_rows)
        if not live:  # nothing runs: the next sentences start afresh
            self.clear()
        elif rows_of.numel() < b:
            self.trim()
        return done

    def trim(self) -> None:
        """After sentences left: the columns of tokens, the cache slots and the source positions that no
        row has any more go (views, no copies)."""
        self.tokens = self.tokens[:, self.tokens.size(1) - int(self.steps.max()) :]
        self.state.forget_slots()
        s = int(self.src_mask.flatten(1).any(0).nonzero().max()) + 1  # the longest source left
        if s < self.src_mask.size(-1):
            self.src_mask = self.src_mask[..., :s]
            self.state.shorten_memory(s)


def padded(src_mask: Tensor, s: int) -> Tensor:
    """A source mask (B, 1, 1, S) made (B, 1, 1, s), the added positions masked."""
    return pad(src_mask, (0, s - src_mask.size(-1)), value=False)
