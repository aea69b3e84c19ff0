"""What every edit of qkvmt.analysis.edits shares: its scope (which kind of attention, which
layers and heads), each field's type checked as the edit is made, and the checks of its values
against the model (`Shape`) as it compiles, each failure one line naming the field.
"""

import functools
from dataclasses import dataclass, fields
from typing import get_type_hints

from tokenizers import Tokenizer

from qkvmt.analysis.trace import KINDS
from qkvmt.errors import UserError
from qkvmt.model.transformer import Transformer
from qkvmt.setting_types import is_whole, whole_number


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


def in_range(name: str, value: int, n: int, what: str) -> int:
    """value as an index of n things (negative: from the end), or a one-line UserError naming them."""
    if not -n <= value < n:
        raise UserError(f"{name}={value!r} does not exist: {what} are 0..{n - 1} (or -{n}..-1 from the end)")
    return value % n


def _typed(name: str, value, hint):
    """`value` as a field of type `hint` takes it (a list becomes a tuple), or a one-line
    UserError: a decimal, a string or a truth value where whole numbers belong is refused here,
    not split into characters or rounded later."""
    if hint is int:
        whole_number(name, value, least=None)
    if hint is str and not isinstance(value, str):
        raise UserError(f"{name}={value!r}: give text")
    if hint == tuple[int, ...] | None and value is not None:
        if not (is_whole(value) or isinstance(value, (list, tuple)) and all(map(is_whole, value))):
            raise UserError(f"{name}={value!r}: give a whole number or a list of whole numbers (null: every one)")
        return (value,) if is_whole(value) else tuple(value)
    return value


@functools.cache
def _hints(cls) -> dict:
    return get_type_hints(cls)


def choice(name: str, value: str, choices) -> str:
    if value not in choices:
        raise UserError(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


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

    def prepare(self, model: Transformer, tokenizer: Tokenizer, src_ids: list[int]) -> None:
        """What the edit needs of the model, for the sentence `src_ids`, before it compiles: its
        compile's second argument. Nothing, but a Patch runs its donor sentence (Patch.prepare)."""
        return None

    def chosen(self, shape: Shape, kinds=KINDS) -> tuple[list[int], list[int]]:
        """The layers and heads, checked against `shape` (a bad one is a one-line UserError)."""
        name = type(self).__name__
        choice(f"{name}.kind", self.kind, kinds)
        n = shape.layers[self.kind]
        layers = list(range(n)) if self.layers is None else list(self.layers)
        heads = list(range(shape.heads)) if self.heads is None else list(self.heads)
        if not layers or not heads:
            raise UserError(f"{name} names no {'layer' if not layers else 'head'}: leave it unset for every one")
        return (
            [in_range(f"{name}.layers", i, n, f"the {self.kind} attention's layers") for i in layers],
            [in_range(f"{name}.heads", h, shape.heads, "the heads") for h in heads],
        )

    def position(self, field: str, side: str, shape: Shape) -> int:
        """The edit's `field` as a query or key position of its kind of attention."""
        n = shape.positions(self.kind, side)
        if n is None:  # checked once the translation is known
            return getattr(self, field)
        tokens = "source" if self.kind == "encoder" or (self.kind == "cross" and side == "key") else "output"
        return in_range(f"{type(self).__name__}.{field}", getattr(self, field), n, f"the {tokens} tokens")
