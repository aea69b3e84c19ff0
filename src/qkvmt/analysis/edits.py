"""Typed edits of a trained model's attention: what `Model.intervene` applies.

Each edit names what it changes in words a user asks about (the keys or the values of two source
words, a head's output, one query's view of one key) and compiles to functions of the sites of
qkvmt.model.sites (qkvmt.analysis.trace.edited writes them, in forced passes and in search):

    Swap(a, b, what)       the keys, the values or both of source positions a and b trade places
    Zero(what)             heads' values, or their outputs (their slice of W_O's input), set to 0
    Patch(donor, what)     keys, values or both at some source positions taken from a second
                           source sentence's pass (activation patching)
    Knockout(query, key)   one query may not attend to one key (attention knockout)

Positions are token positions, as the attention maps label them: source tokens x_1 .. x_n </s>
for keys; for a decoder or cross-attention query, the row that predicts output token `query`.
`layers` and `heads` are tuples (None: every one; one number is a tuple of one); negative layers
count from the end. Every field is checked for its type as the edit is made, and against the
model as it compiles.

An edit written as data (`qkvmt intervene edits=[...]`, the explorer's what-if request) is read by
qkvmt.analysis.edit_parser into these dataclasses: one parser, one set of checks.
"""

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import get_type_hints

import torch
from torch import Tensor

from qkvmt.analysis.trace import KINDS, Where
from qkvmt.errors import UserError

PARTS = ("keys", "values", "both")  # what a Swap or a Patch exchanges
SITES_OF = {"keys": ("k",), "values": ("v",), "both": ("k", "v")}
SOURCE_KINDS = ("cross", "encoder")  # the attention whose keys are source tokens: what a Swap or a Patch acts on
ZERO_PARTS = ("values", "output")


@dataclass(frozen=True)
class Shape:
    """What an edit is checked against: the model's layers and heads, and the pair's lengths."""

    layers: dict[str, int]  # per kind
    heads: int
    d_k: int
    src_len: int  # source tokens, </s> included
    out_len: int | None  # output tokens of the translation, </s> included; None: not translated yet

    def positions(self, kind: str, side: str) -> int | None:
        """How many query ("query") or key ("key") positions an edit of `kind` may name (None:
        output positions, before the translation is known)."""
        if kind == "cross":
            return self.src_len if side == "key" else self.out_len
        return self.src_len if kind == "encoder" else self.out_len


def _in_range(name: str, value: int, n: int, what: str) -> int:
    """value as an index of n things (negative: from the end), or a one-line UserError naming them."""
    if not -n <= value < n:
        raise UserError(f"{name}={value!r} does not exist: {what} are 0..{n - 1} (or -{n}..-1 from the end)")
    return value % n


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _typed(name: str, value, hint):
    """`value` as a field of type `hint` takes it (a list becomes a tuple), or a one-line
    UserError: a decimal, a string or a truth value where whole numbers belong is refused here,
    not split into characters or rounded later."""
    if hint is int and not _is_whole(value):
        raise UserError(f"{name}={value!r}: give a whole number")
    if hint is str and not isinstance(value, str):
        raise UserError(f"{name}={value!r}: give text")
    if hint == tuple[int, ...] | None and value is not None:
        if not (_is_whole(value) or isinstance(value, (list, tuple)) and all(map(_is_whole, value))):
            raise UserError(f"{name}={value!r}: give a whole number or a list of whole numbers (null: every one)")
        return (value,) if _is_whole(value) else tuple(value)
    return value


@functools.cache
def _hints(cls) -> dict:
    return get_type_hints(cls)


def _choice(name: str, value: str, choices) -> str:
    if value not in choices:
        raise UserError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


def exchanged(t: Tensor, a: int | Tensor, b: int | Tensor, heads: list[int] | None = None) -> Tensor:
    """A copy of a site t (B, H, T_k, d_k) whose key positions a and b trade places in `heads`
    (None: every head). a and b: one position for every row, or one per row, (B,) each."""
    rows = torch.arange(t.size(0), device=t.device)[:, None]  # (B, 1)
    a, b = (torch.as_tensor(p, device=t.device).expand(t.size(0))[:, None] for p in (a, b))  # (B, 1) each
    h = torch.arange(t.size(1), device=t.device) if heads is None else torch.tensor(heads, device=t.device)
    out = t.clone()
    out[rows, h, a], out[rows, h, b] = t[rows, h, b], t[rows, h, a]  # each (B, heads, d_k)
    return out


@dataclass(frozen=True, kw_only=True)
class Scope:
    """Which layers and heads of which kind of attention an edit touches (keywords only, so an
    edit's own fields come first: Swap(2, 5, "keys", layers=(0,)))."""

    kind: str = "cross"
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None

    def __post_init__(self):
        hints = _hints(type(self))
        for f in fields(self):
            value = _typed(f"{type(self).__name__}.{f.name}", getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)  # frozen: the checked value, lists as tuples

    def chosen(self, shape: Shape, kinds=KINDS) -> tuple[list[int], list[int]]:
        """The layers and heads, checked against `shape` (a bad one is a one-line UserError)."""
        name = type(self).__name__
        _choice(f"{name}.kind", self.kind, kinds)
        n = shape.layers[self.kind]
        layers = list(range(n)) if self.layers is None else list(self.layers)
        heads = list(range(shape.heads)) if self.heads is None else list(self.heads)
        if not layers or not heads:
            raise UserError(f"{name} names no {'layer' if not layers else 'head'}: leave it unset for every one")
        return (
            [_in_range(f"{name}.layers", i, n, f"the {self.kind} attention's layers") for i in layers],
            [_in_range(f"{name}.heads", h, shape.heads, "the heads") for h in heads],
        )

    def position(self, field: str, side: str, shape: Shape) -> int:
        """The edit's `field` as a query or key position of its kind of attention."""
        n = shape.positions(self.kind, side)
        if n is None:  # checked once the translation is known
            return getattr(self, field)
        tokens = "source" if self.kind == "encoder" or (self.kind == "cross" and side == "key") else "output"
        return _in_range(f"{type(self).__name__}.{field}", getattr(self, field), n, f"the {tokens} tokens")


@dataclass(frozen=True)
class Swap(Scope):
    """Source positions a and b trade their keys, their values or both (`what`), in cross- or the
    encoder's self-attention. Both leaves every output unchanged: attention is a lookup over
    key-value pairs, and the pairs are only reordered."""

    a: int = 0
    b: int = 1
    what: str = "both"

    def __post_init__(self):
        super().__post_init__()
        if self.a == self.b:  # refused before any model loads; a and -1 naming one token, as it compiles
            raise UserError(f"Swap.a=Swap.b={self.a}: pick two different source tokens to swap")

    def compile(self, shape: Shape) -> dict[Where, Callable]:
        layers, heads = self.chosen(shape, SOURCE_KINDS)
        a, b = self.position("a", "key", shape), self.position("b", "key", shape)
        if a == b:
            raise UserError(
                f"Swap.a={self.a} and Swap.b={self.b} are the same source token ({a}): pick two different tokens"
            )

        def swap(t: Tensor) -> Tensor:  # (B, H, T_k, d_k)
            return exchanged(t, a, b, heads)

        return {(self.kind, i, s): swap for i in layers for s in SITES_OF[_choice("Swap.what", self.what, PARTS)]}


@dataclass(frozen=True)
class Zero(Scope):
    """Heads' values ("values": every key's v) or outputs ("output": their slice of W_O's input)
    set to zero, so the head hands nothing over."""

    what: str = "output"

    def compile(self, shape: Shape) -> dict[Where, Callable]:
        layers, heads = self.chosen(shape)
        if _choice("Zero.what", self.what, ZERO_PARTS) == "values":

            def zero(t: Tensor) -> Tensor:  # (B, H, T_k, d_k)
                t = t.clone()
                t[:, heads] = 0
                return t

            return {(self.kind, i, "v"): zero for i in layers}
        keep = torch.ones(shape.heads, shape.d_k)
        keep[heads] = 0

        def silence(t: Tensor) -> Tensor:  # (B, T_q, D)
            return t * keep.flatten().to(t.device, t.dtype)

        return {(self.kind, i, "heads"): silence for i in layers}


@dataclass(frozen=True)
class Patch(Scope):
    """Keys, values or both at source `positions` replaced by those a second source sentence
    (`donor`) gives there: activation patching. The donor must split into as many tokens;
    positions None: every position whose token differs."""

    donor: str = ""
    what: str = "values"
    positions: tuple[int, ...] | None = None

    def compile(self, shape: Shape, donor: "Donor") -> dict[Where, Callable]:
        layers, heads = self.chosen(shape, SOURCE_KINDS)
        _choice("Patch.what", self.what, PARTS)
        if self.positions is None and not donor.differs:
            raise UserError(f"the donor {self.donor!r} has the sentence's own tokens: nothing to patch")
        given = list(self.positions) if self.positions is not None else donor.differs
        if not given:
            raise UserError("Patch names no position: leave positions unset for every one whose token differs")
        positions = [_in_range("Patch.positions", p, shape.src_len, "the source tokens") for p in given]
        donor_sites = donor.sites

        def patched(where):
            donor = donor_sites[where]

            def patch(t: Tensor) -> Tensor:  # (B, H, S, d_k)
                h, p = torch.tensor(heads)[:, None], torch.tensor(positions)[None, :]  # every head at every position
                t = t.clone()
                t[:, h, p] = donor[:, h, p].to(t.dtype).expand(t.size(0), -1, -1, -1)
                return t

            return patch

        return {w: patched(w) for i in layers for w in [(self.kind, i, s) for s in SITES_OF[self.what]]}


@dataclass(frozen=True)
class Knockout(Scope):
    """Query position `query` may not attend to key position `key`, in every head of the chosen
    layers (the mask is the heads' own). A decoder or cross-attention query is the row that
    predicts output token `query`."""

    query: int = 0
    key: int = 0

    def compile(self, shape: Shape) -> dict[Where, Callable]:
        layers, _ = self.chosen(shape)
        if self.heads is not None:
            raise UserError("Knockout acts on every head of a layer (they share one mask): leave heads unset")
        q, k = self.position("query", "query", shape), self.position("key", "key", shape)

        def knockout(mask: Tensor) -> Tensor:  # (B, 1, T_q, T_k); in search, T_q grows step by step
            if mask.size(-2) <= q:
                return mask
            mask = mask.clone()
            mask[..., q, k] = False
            return mask

        knockout.query_positions = True  # cached search sees one query at a time: edited() refuses it there
        return {(self.kind, i, "mask"): knockout for i in layers}


@dataclass(frozen=True)
class Donor:
    """A Patch's second sentence, run: its sites (kind, layer, "k" or "v") -> (1, H, S, d_k), and
    the source positions whose token differs from the edited sentence's."""

    sites: dict[tuple[str, int, str], Tensor]
    differs: list[int]


EDITS = (Swap, Zero, Patch, Knockout)


def compiled(edits, shape: Shape, donors: dict | None = None) -> dict[Where, Callable]:
    """The site functions of `edits`, in order; two edits of one site apply one after the other.
    donors: each Patch's Donor, by id()."""
    out: dict[Where, Callable] = {}
    for edit in edits:
        if not isinstance(edit, EDITS):
            raise UserError(f"{edit!r} is not an edit: give {', '.join(e.__name__ for e in EDITS)} objects")
        sites = edit.compile(shape, donors[id(edit)]) if isinstance(edit, Patch) else edit.compile(shape)
        for where, fn in sites.items():
            before = out.get(where)
            out[where] = fn if before is None else _then(before, fn)
    return out


def _then(first: Callable, second: Callable) -> Callable:
    def both(t: Tensor) -> Tensor:
        return second(first(t))

    both.query_positions = getattr(first, "query_positions", False) or getattr(second, "query_positions", False)
    return both


def query_positional(sites: dict[Where, Callable]) -> bool:
    """Whether any site function indexes the queries by position (search must then run uncached)."""
    return any(getattr(fn, "query_positions", False) for fn in sites.values())
