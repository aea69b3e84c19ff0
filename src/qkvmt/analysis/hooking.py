"""Hooks by name: a function of one's own at any activation (qkvmt.model.hook_names), in a forced
pass and inside search, and the one engine every read and edit of the model runs on.

A hook is `fn(activation, ctx)`: it returns a tensor to take the activation's place, or None to
leave it. `ctx` (HookContext) says where it is: the name, stack, layer and part, the decoding step,
the positions of this call's queries (one per step under the KV cache), which sentence of the call
and which beam each row is, and the tokens of both sides. `hooked` puts hooks on the model for the
length of a block and takes them off after it, an exception included; they fire in the calling
thread only (qkvmt.analysis.hooks). A hook on a site of the explicit attention path only
(SITES' explicit_only: q, k, v, mask, scores, weights) switches its layer to that path while the
block is open, so it takes effect under search's fused kernel too.

A search lets the sentences that are done leave its batch, so row i may be another sentence at a
later step: `ctx.sentences` says which. Cross-attention's keys, values, memory and mask have one row
per sentence, shared by its beams; there `ctx.beams` is None.
"""

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from qkvmt.analysis.hooks import after, before
from qkvmt.decoding import step_view
from qkvmt.errors import UserError
from qkvmt.model.hook_names import HookPoint, hook_points, resolved

Hook = Callable[[Tensor, "HookContext"], Tensor | None]


@dataclass
class Call:
    """What a pass or a search is over, for the token labels of its contexts: each sentence's
    source tokens (</s> included) and, in a forced pass, the target tokens each row reads (<s> first)."""

    source_tokens: Callable[[], list[list[str]]] = list
    target_tokens: Callable[[], list[list[str]]] = list
    id_tokens: Callable[[list[int]], list[str]] = list  # the tokens of target ids, for a search's prefixes
    _seen: dict = field(default_factory=dict)

    def once(self, what: str, make: Callable):
        if what not in self._seen:
            self._seen[what] = make()
        return self._seen[what]


class HookContext:
    """Where a hook fires: read lazily, so a hook that asks nothing costs nothing."""

    __slots__ = ("point", "rows", "positions", "_call", "_view")

    def __init__(self, point: HookPoint, t: Tensor, call: Call, view: step_view.StepView | None):
        self.point, self._call, self._view = point, call, view
        self.rows = t.size(0)
        axes = point.spec.axes
        axis = "position" if "position" in axes else "query" if "query" in axes else None
        self.positions = t.size(axes.index(axis)) if axis is not None else None

    name = property(lambda self: self.point.name)
    stack = property(lambda self: self.point.stack)
    layer = property(lambda self: self.point.layer)
    part = property(lambda self: self.point.part)
    site = property(lambda self: self.point.spec.name)
    axes = property(lambda self: self.point.spec.axes)

    @property
    def step(self) -> int | None:
        """The output token the search chooses now, from 0; None in a forced pass and the encoder's."""
        return self._view.step if self._view is not None else None

    @property
    def query_positions(self) -> Tensor | None:
        """The positions this call's queries (or stream rows) are at: every one in a forced pass; in
        search the newest alone under the KV cache, the whole prefix without it. None: no such axis."""
        if self.positions is None:
            return None
        searched = self.point.stack == "decoder" and self.step is not None
        end = self._view.prefix.size(1) if searched else self.positions
        return torch.arange(end - self.positions, end)

    def _per_sentence(self) -> bool:
        v = self._view
        return v is not None and v.width > 1 and self.rows == v.sentence_of.numel()

    @property
    def sentences(self) -> Tensor:
        """(rows,) which sentence of the call each row is."""
        if self._view is None:
            return torch.arange(self.rows)
        return self._view.sentence_of.cpu() if self._per_sentence() else self._view.sentences.cpu()

    @property
    def beams(self) -> Tensor | None:
        """(rows,) which beam of its sentence each row is; None outside search, and where a row is a sentence."""
        if self._view is None or self._view.step is None or self._per_sentence():
            return None
        return self._view.beams.cpu()

    @property
    def source_tokens(self) -> list[list[str]]:
        """Each row's source tokens."""
        tokens = self._call.once("source", self._call.source_tokens)
        return [tokens[i] for i in self.sentences.tolist()]

    @property
    def target_tokens(self) -> list[list[str]]:
        """Each row's target tokens: those it reads (<s> and the tokens so far, in search)."""
        if self._view is not None and self._view.prefix is not None and not self._per_sentence():
            return [self._call.id_tokens(row) for row in self._view.prefix.tolist()]
        tokens = self._call.once("target", self._call.target_tokens)
        return [tokens[i] for i in self.sentences.tolist()] if tokens else []


def _checked(out, t: Tensor, point: HookPoint, fn) -> Tensor:
    """A hook's replacement, or a one-line UserError naming the hook and what is wrong with it."""
    what = None
    if not isinstance(out, Tensor):
        what = f"{type(out).__name__} {out!r:.40}"
    elif out.shape != t.shape:
        what = f"shape {tuple(out.shape)}"
    elif out.dtype != t.dtype:
        what = f"dtype {out.dtype}"
    elif out.device != t.device:
        what = f"a tensor on {out.device}"
    elif out.is_floating_point() and torch.isnan(out).any():
        what = "NaN"
    if what is not None:
        name = getattr(fn, "__qualname__", repr(fn))
        raise UserError(
            f"hook {name} at {point.name} returned {what}: return None to keep the activation, or a tensor of "
            f"its shape {tuple(t.shape)} and dtype {t.dtype} (axes {', '.join(point.spec.axes)}) without NaN"
        )
    return out


def _fire(point: HookPoint, fns: list[Hook], read, call: Call):
    def hook(module, args, t):
        if not isinstance(t, Tensor):  # a self-attention's y: None
            return None
        if fns:
            ctx = HookContext(point, t, call, step_view.current())
            for fn in fns:
                out = fn(t, ctx)
                if out is not None:
                    t = _checked(out, t, point, fn)
        if read is not None:
            read(point.name, t)
        return t

    return hook


def _explicit(point: HookPoint, refuse_cached: bool):
    def hook(module, args, kwargs):
        if refuse_cached and kwargs.get("cache") is not None:
            raise UserError(
                f"an edit of query positions in {point.name.rsplit('.', 1)[0]} cannot follow cached decoding, "
                "whose queries arrive one step at a time: decode with use_cache=False"
            )
        return args, {**kwargs, "need_weights": True}

    return hook


@contextlib.contextmanager
def hooked(
    model,
    hooks: dict[str, list[Hook]] | None = None,
    read: Callable[[str, Tensor], None] | None = None,
    reads: Iterable[str] = (),
    call: Call | None = None,
    refuse_cached: Iterable[str] = (),
):
    """Within the block, each named point's activation passes its hooks, in order, and then `read`
    (name, tensor) sees it, for the names of `hooks` and `reads`. An explicit-path point switches its
    layer to that path; `refuse_cached` names points whose hooks index queries by position, which
    cached search refuses. Every hook is removed when the block ends, however it ends."""
    hooks, reads, refused = hooks or {}, set(reads), set(refuse_cached)
    if not hooks and not reads:  # a plain translate: no point to look up
        yield {}
        return
    points = hook_points(model)
    unknown = [n for n in [*hooks, *reads] if n not in points]
    if unknown:  # it would never fire: a typo is named with the close names, a glob as one
        resolved(unknown, points, "hook")
        raise UserError(f"hook {unknown[0]!r}: hooked() takes names; hooks_by_name resolves a glob to them")
    call = call or Call()
    handles = []
    try:
        explicit: dict[
            int, tuple[HookPoint, bool]
        ] = {}  # per attention module: a point of it, and if cached is refused
        for name in [n for n in points if n in hooks or n in reads]:
            point = points[name]
            handles.append(
                after(point.module, _fire(point, hooks.get(name, []), read if name in reads else None, call))
            )
            if point.spec.explicit_only:
                first, refuse = explicit.get(id(point.attention), (point, False))
                explicit[id(point.attention)] = (first, refuse or name in refused)
        for point, refuse in explicit.values():
            handles.append(before(point.attention, _explicit(point, refuse), True))
        yield points
    finally:
        for h in handles:
            h.remove()
