"""Greedy and batched beam search over the incremental decoder.

Each step feeds only the newest token: decoder self-attention keys and values are cached per
layer, and cross-attention keys and values are computed once per source sentence. With
`use_cache=False` every step re-runs the whole prefix instead (the reference the cached path
is tested against, and benchmarked against).
"""

import math
from dataclasses import asdict, dataclass, fields, replace

import torch
from torch import Tensor, nn

from qkvmt.decoding.compute_type import COMPUTE_TYPES
from qkvmt.decoding.finished import Finished, Hypothesis
from qkvmt.decoding.rows import are_rows_kept
from qkvmt.decoding.step_view import at, sentences_searched
from qkvmt.decoding.stepper import Stepper, max_lengths
from qkvmt.errors import UserError
from qkvmt.model.transformer import Transformer
from qkvmt.setting_types import check_fields


@dataclass
class DecodeConfig:
    beam_size: int = 5
    max_len_a: float = 1.5  # output length limit: a * source length + b tokens
    max_len_b: int = 10
    min_len: int = 1  # output tokens, EOS included, before EOS may be chosen
    len_penalty: float = 1.0  # alpha; 0 ranks finished hypotheses by raw log-probability
    len_penalty_style: str = "fairseq"  # fairseq: score / len^a; gnmt: score / ((5 + len) / 6)^a
    use_cache: bool = True
    max_tokens: int = 4096  # source tokens per batch (each sentence decodes beam_size rows)
    # Settings of models imported from transformers (qkvmt.hf), each at the value that keeps qkvmt's own search:
    forced_first_id: int | None = None  # the first output token, forced at log-probability 0: the target
    # language of a many-to-many model (transformers' forced_bos_token_id)
    free_eos_at_limit: bool = False  # at the length limit </s> is forced at log-probability 0, as transformers'
    # forced_eos_token_id does, instead of keeping its own
    cut_at_limit: bool = False  # at the length limit an output ends on the best token there, whatever it is, without
    # </s> or its probability, as transformers' generate does without forced_eos_token_id
    renormalize: bool = False  # log-probabilities normalised again after the bans and forced tokens, as
    # transformers' renormalize_logits
    early_stopping: bool = True  # a sentence stops at beam_size finished hypotheses; False: transformers'
    # early_stopping=False, which goes on while the best live beam, scored at its length now, beats the worst finished
    compute_type: str = "float32"  # float32, bfloat16 or int8 (linear layers' weights): qkvmt.decoding.compute_type
    compile: bool | str = "auto"  # the compiled step (qkvmt.decoding.engine): true, false, or auto (where it pays)

    def __post_init__(self):
        check_fields(self, "decode.")  # a value of another type, before the comparisons below fail on it
        if self.beam_size < 1:
            raise UserError(f"decode.beam_size must be at least 1, got {self.beam_size}")
        if self.min_len < 1:
            raise UserError(f"decode.min_len must be at least 1 (EOS counts), got {self.min_len}")
        # NaN ranks every hypothesis alike and a negative limit cuts outputs short, each without a word
        if not math.isfinite(self.len_penalty):
            raise UserError(f"decode.len_penalty={self.len_penalty}: give a finite number")
        if not (math.isfinite(self.max_len_a) and self.max_len_a >= 0) or self.max_len_b < 0:
            raise UserError(
                f"decode.max_len_a={self.max_len_a}, decode.max_len_b={self.max_len_b}: the output length limit "
                "a * source length + b takes a finite a and a whole b, each 0 or more"
            )
        if self.max_tokens < 1:
            raise UserError(f"decode.max_tokens must be at least 1, got {self.max_tokens}")
        if self.len_penalty_style not in ("fairseq", "gnmt"):
            raise UserError(f"decode.len_penalty_style must be 'fairseq' or 'gnmt', got {self.len_penalty_style!r}")
        if self.compute_type not in COMPUTE_TYPES:
            raise UserError(f"decode.compute_type must be one of {', '.join(COMPUTE_TYPES)}, got {self.compute_type!r}")
        if isinstance(self.compile, bool):  # Hydra reads decode.compile=true as a boolean
            self.compile = "true" if self.compile else "false"
        if self.compile not in ("auto", "true", "false"):
            raise UserError(f"decode.compile={self.compile!r}: use auto, true or false")
        if self.compile == "true" and not self.use_cache:
            raise UserError(
                "decode.compile=true and decode.use_cache=false: the compiled step runs over the KV cache; "
                "set one of them otherwise"
            )
        if self.compile == "true" and self.compute_type == "int8":
            raise UserError(
                "decode.compile=true and decode.compute_type=int8: the compiled step computes in float32 or "
                "bfloat16, and int8 runs on the eager one; set decode.compile=auto or false"
            )
        if self.free_eos_at_limit and self.cut_at_limit:
            raise UserError(
                "decode.free_eos_at_limit=true and decode.cut_at_limit=true: an output at the length limit ends "
                "either with a free </s> or without one; set one of them to false"
            )

    @classmethod
    def merged(cls, stored: dict, given: dict) -> "DecodeConfig":
        """`stored` settings (a checkpoint's own) with every field `given` sets (not None)
        taking precedence; a name that is no setting is a UserError."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise UserError(f"{unknown[0]!r} is no decoding setting: use {', '.join(names)}")
        return cls(**(stored | {k: v for k, v in given.items() if v is not None}))

    @classmethod
    def of_model(cls, own: dict, settings: "DecodeConfig | None", given: dict) -> "DecodeConfig":
        """A model's decoding: `settings` (default: its `own`, the settings it was stored with) with every
        field `given` taking precedence. A many-to-many model's target language (`own`'s forced_first_id)
        is forced first unless they force another: settings made without the model (decode.* of a
        command) cannot know it."""
        cfg = cls.merged(asdict(settings) if settings is not None else own, given)
        language = own.get("forced_first_id")
        return cfg if cfg.forced_first_id is not None or language is None else replace(cfg, forced_first_id=language)


def length_penalty(length: Tensor, cfg: DecodeConfig) -> Tensor:
    if cfg.len_penalty_style == "gnmt":
        return ((5.0 + length) / 6.0) ** cfg.len_penalty
    return length.float() ** cfg.len_penalty


# Done sentences leave the batch once they are at least 1/PRUNE_SHARE of it: leaving copies every
# cache row (a step otherwise copies only the beams that moved), so it waits until that pays.
PRUNE_SHARE = 4


def candidates(step: Stepper, prefix: Tensor, scores: Tensor, width: int, k: int) -> tuple[Tensor, ...]:
    """The best 2K continuations of each of B sentences of `width` live beams (scores (B, W), prefix
    (B*W, t+1)): their scores and beams (B, 2K), tokens (B, 2K) and prefixes (B, 2K, t). They are
    among the best 2K of each of its beams, so each row's vocabulary is ranked first, then only
    W * 2K candidates a sentence."""
    b, t, per_row = scores.size(0), prefix.size(1) - 1, 2 * k
    row_logp, row_tokens = step(prefix).topk(per_row, dim=-1)  # (B*W, 2K)
    cand = (scores[:, :, None] + row_logp.view(b, width, per_row)).view(b, width * per_row)
    top_scores, top_ids = cand.topk(2 * k, dim=-1)  # (B, 2K)
    beam = top_ids // per_row
    token = row_tokens.view(b, width * per_row).gather(1, top_ids)
    prefixes = prefix[:, 1:].view(b, width, t).gather(1, beam[:, :, None].expand(b, 2 * k, t))  # (B, 2K, t)
    return top_scores, beam, token, prefixes


def advance(
    step: Stepper,
    prefix: Tensor,
    scores: Tensor,
    width: int,
    limit: Tensor,
    active: Tensor,
    finished: Finished,
    cfg: DecodeConfig,
    tokens: Tensor | None = None,
) -> tuple[Tensor, ...]:
    """A step of beam search up to what it must read back: the candidates of B sentences of `width` live
    beams, those that end finished (`finished` and `active` (B,) updated in place), and the best K of each
    sentence that go on: their scores and indices among the candidates (B, K), ordered so that rows
    continuing themselves stay put, and the candidates' beams and tokens (B, 2K).
    tokens: (B, 1) each sentence's tokens so far, where they differ (qkvmt.decoding.running: its prefixes
    are left-padded); by default the prefix's."""
    k = cfg.beam_size
    t = prefix.size(1) - 1 if tokens is None else tokens  # the tokens so far
    eos_id = step.eos_id
    top_scores, beam, token, prefixes = candidates(step, prefix, scores, width, k)
    ends = ((token == eos_id) | (t + 1 >= limit[:, None])) & torch.isfinite(top_scores)
    normed = top_scores / length_penalty(lengths_like(top_scores, t + 1), cfg)
    ended = torch.cat([prefixes, token[:, :, None]], dim=2)  # its last token too (until_end drops an EOS)
    if cfg.early_stopping:
        finished.add(ends & active[:, None], normed, ended)
        active &= (finished.count < k) & (t + 1 < limit[:, None])[:, 0]
    else:
        finished.merge(ends & active[:, None], normed, ended)
    # Continue with the best K candidates of each sentence that do not end.
    keep_scores, keep = top_scores.masked_fill(ends, float("-inf")).topk(k, dim=-1)  # (B, K)
    if not cfg.early_stopping:  # stop where the best live beam, at its length now, cannot beat the worst kept
        best_live = keep_scores[:, :1] / length_penalty(lengths_like(keep_scores[:, :1], t + 1), cfg)
        active &= (best_live > finished.worst()[:, None])[:, 0] & (t + 1 < limit[:, None])[:, 0]
    if width == k:  # beams are a set: order them so that rows continuing themselves stay put
        order = stable_order(beam.gather(1, keep))
        keep_scores, keep = keep_scores.gather(1, order), keep.gather(1, order)
    return keep_scores, keep, beam, token


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, cfg: DecodeConfig, compiled=None) -> list[Hypothesis]:
    """Batched beam search: B sentences × K beams advance together as B*K decoder rows; `compiled`:
    qkvmt.decoding.compiled's beam_step compiled, which then runs every step after the first.

    Each step takes the top 2K continuations per sentence, so K continue even if some end in
    EOS. Finished hypotheses are ranked by length-normalised score; a sentence stops once it
    has K of them, or when it reaches its length limit, where every candidate ends (with EOS,
    or, with cut_at_limit, on its last token), and the stopped ones leave the batch (not within
    qkvmt.decoding.rows.rows_kept, where every row stays the sentence it was, nor in a compiled search).
    All bookkeeping is tensor operations, with no Python work per hypothesis; each step reads
    back only how many sentences are still active and which cache rows move.
    """
    c, k = model.cfg, cfg.beam_size
    check_beam_size(k, c.target_vocab_size)
    b, dev = src.size(0), src.device
    memory, src_mask, _ = model.encode(src)
    limit = max_lengths(src_mask.flatten(1).sum(-1), cfg, c.max_positions)  # (B,)
    max_t = int(limit.max())
    # The beams of a sentence share its memory (B rows): cross-attention folds them together.
    # All K beams would start identical, so the first step runs one row per sentence.
    step = Stepper(model, memory, src_mask, limit, cfg, max_t if compiled else None)
    prefix = torch.full((b, 1), c.bos_id, dtype=torch.long, device=dev)
    scores = torch.zeros(b, 1, device=dev)
    width = 1  # live rows per sentence: 1 at the first step, K after
    finished = Finished(b, k, max_t, c.pad_id, dev)
    active = torch.ones(b, dtype=torch.bool, device=dev)
    # Only an nn.Module's state drops sentences (keep_sentences); a duck-typed model keeps them all.
    # A compiled step keeps them all too: its rows stay as many, so its graph serves every step.
    prunable = isinstance(model, nn.Module) and not are_rows_kept() and compiled is None
    sentence_of = sentences_searched(b, dev)  # (B,) the sentence of the call each of the batch is, for hooks
    for t in range(max_t):
        at(sentence_of, width, t, prefix)
        if compiled is not None and width == k:  # one graph, from the decoder layers to the cache rows moved
            prefix, scores, src_rows = compiled(step, prefix, scores, limit, active, finished, cfg)
            if not active.any():
                break
            step.reorder_beams(src_rows)
            continue
        keep_scores, keep, beam, token = advance(step, prefix, scores, width, limit, active, finished, cfg)
        live = int(active.sum())
        if not live:
            break
        rows_of = torch.arange(b, device=dev)  # the sentence (its rows, as they were this step) each one continues
        if prunable and b - live >= max(1, b // PRUNE_SHARE):  # the stopped sentences leave: no rows spent on them
            rows_of = active.nonzero()[:, 0]
            sentence_of = sentence_of[rows_of]
            finished.keep(active, c.eos_id)
            step.keep_sentences(rows_of)
            limit, active = limit[rows_of], active[rows_of]
            keep_scores, keep, beam, token = (x.index_select(0, rows_of) for x in (keep_scores, keep, beam, token))
            b = live
        src_rows = (rows_of[:, None] * width + beam.gather(1, keep)).view(-1)  # (B*K,)
        scores = keep_scores.masked_fill(~active[:, None], float("-inf"))
        prefix = torch.cat([prefix.index_select(0, src_rows), token.gather(1, keep).view(-1, 1)], dim=1)
        step.reorder_beams(src_rows)
        width = k
    return finished.results(c.eos_id)


def lengths_like(like: Tensor, length: int | Tensor) -> Tensor:
    """`length` (a number, or (B, 1) one a sentence) as a float tensor of the shape of `like` (B, ·)."""
    return length.expand_as(like).to(like.dtype) if isinstance(length, Tensor) else torch.full_like(like, length)


def check_beam_size(k: int, vocab_size: int) -> None:
    """Each step ranks 2K continuations per sentence, so the vocabulary must hold that many."""
    if 2 * k > vocab_size:
        raise UserError(f"decode.beam_size={k} needs a vocabulary of at least {2 * k} tokens (has {vocab_size})")


def stable_order(parent: Tensor) -> Tensor:
    """parent: (B, K) the beam each new hypothesis extends -> (B, K) an order of them in which
    as many as possible sit in their parent's slot: the first child of each parent takes its
    parent's slot, the others fill the free slots in turn. A row that extends itself keeps its
    KV cache where it is, so reordering copies only the rows that really move."""
    b, k = parent.shape
    j = torch.arange(k, device=parent.device)
    same_earlier = (parent[:, :, None] == parent[:, None, :]) & (j[None, None, :] < j[None, :, None])  # (B, K, K)
    first = ~same_earlier.any(dim=-1)  # (B, K): the first child of its parent
    taken = ((parent[:, :, None] == j) & first[:, :, None]).any(dim=1)  # (B, K) slot claimed by a first child
    free_slots = taken.long().argsort(dim=1, stable=True)  # free slots first, in order
    rank = (~first).long().cumsum(dim=1) - 1  # the other children, numbered in order
    slot = torch.where(first, parent, free_slots.gather(1, rank.clamp(min=0)))
    return torch.empty_like(slot).scatter_(1, slot, j.expand(b, k))  # slot -> child
