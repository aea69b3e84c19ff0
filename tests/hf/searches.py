"""What the search tests compare qkvmt's search with: transformers' `generate` on a batch of random sources,
and the check that the batch can tell searches apart. A model whose outputs all stop at one length, or whose
beam search finds greedy's outputs, would pass a comparison of beam search or of the length limit with any of
them: the tests build models where neither holds (folders.randomized's eos_bias and steer) and check it."""

import torch

from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.inputs import build_inputs

MAX_LENGTH = 14  # generate's max_length, the decoder's start token counted: 13 output tokens at most


def sources(first: int, last: int, start: list[int] | None = None, count: int = 16) -> list[list[int]]:
    """`count` sources of 2 to 9 random tokens from first to last (each after `start`, a language token)."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 10, (count,), generator=g).tolist()
    return [(start or []) + torch.randint(first, last + 1, (n,), generator=g).tolist() for n in lengths]


def generated(hf, src: list[list[int]], pad: int, eos: int, **settings) -> tuple[list[list[int]], list[float] | None]:
    """transformers' outputs for `src` under the folder's generation settings and `settings`: each without
    the decoder's start token and the padding, ending with </s> where generate ended it; and beam search's
    scores (None for greedy)."""
    width = max(map(len, src)) + 1
    ids = torch.tensor([s + [eos] + [pad] * (width - len(s) - 1) for s in src])
    with torch.no_grad():
        out = hf.generate(
            input_ids=ids, attention_mask=ids != pad, return_dict_in_generate=True, output_scores=True, **settings
        )
    scores = getattr(out, "sequences_scores", None)
    return [
        [t for t in row[1:] if t != pad] for row in out.sequences.tolist()
    ], None if scores is None else scores.tolist()


def tokens(outputs: list[list[int]], eos: int) -> list[list[int]]:
    """The outputs as qkvmt's hypotheses hold them: without </s>."""
    return [row[: row.index(eos)] if eos in row else row for row in outputs]


def at_limit(outputs: list[list[int]]) -> int:
    """How many outputs fill the length limit."""
    return sum(len(row) == MAX_LENGTH - 1 for row in outputs)


def check_telling(greedy: list[list[int]], beam: list[list[int]], searched: list[list[int]]) -> None:
    """generate's outputs can tell a search from another: some of `searched` (the search under test) reach the
    length limit, some of greedy's or beam search's end before it, and beam search differs from greedy on
    some sentences."""
    assert at_limit(searched) > 0, [len(row) for row in searched]
    assert at_limit(greedy + beam) < len(greedy + beam), "every output reaches the length limit"
    assert any(g != b for g, b in zip(greedy, beam)), "beam search finds greedy's outputs"


def ours(model, src: list[list[int]], decode: dict) -> tuple[list[list[int]], list[float]]:
    """qkvmt's outputs for `src` with the folder's decoding settings `decode`, and their scores."""
    found = generate(model, build_inputs(src, None, model.cfg.specials).src, DecodeConfig(**decode))
    return [h.tokens for h in found], [h.score for h in found]
