"""One teacher-forced pass, traced: what every attention layer computed, at named sites.

The sites of each (kind, layer), kind one of KINDS, and of the model are qkvmt.model.sites.SITES
and MODEL_SITE_SPECS: their names, shapes, where each is reached and whether it may be written.
A trace also keeps the logits (B, T, V).

`trace()` reads every site in one pass; `edited()` replaces the tensor at any writable site
while its block is open: head masking, value zeroing, deleted source tokens and the
interventions of qkvmt.analysis.interventions all write through it, in forced passes and in
search alike. An edit of a site that fires only on the explicit path (Q, K, V, the mask, the
scores, the weights) switches its layer to that path while the block is open, so it takes effect
under search's fused kernel too; `_paths` alone makes that choice. Every site is a module
(`site_modules`), read and written alike by a forward hook on it, removed before the function
returns: nothing stays on the model, and the hooks fire in the calling thread only
(qkvmt.analysis.hooks), so another thread using the model meanwhile sees it unedited.

An edit is a SiteEdit (a plain function stands for one with its defaults): the function, and
what a search must know of it, said as fields, not read off the model: whether it names queries
by position (cached search, one query a step, refuses it) and whether it keeps rows (while it is
open no sentence leaves a search's batch, qkvmt.decoding.rows).
"""

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, make_dataclass

import torch
from torch import Tensor, nn

from qkvmt.analysis.hooks import after, before
from qkvmt.decoding.rows import rows_kept
from qkvmt.errors import UserError
from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.layers import Residual
from qkvmt.model.sites import EXPLICIT_ONLY, LAYER_SITES, MODEL_SITES, WRITABLE
from qkvmt.model.transformer import AttentionWeights, Transformer

KINDS = ("encoder", "decoder", "cross")


@dataclass(frozen=True)
class SiteEdit:
    """An edit of one site: a function of its tensor, and what a search must know of it."""

    fn: Callable[[Tensor], Tensor]
    indexes_queries: bool = False  # it names queries by position: cached search, one query a step, refuses it
    keeps_rows: bool = True  # it may read row i as sentence i: no sentence leaves a search's batch while it is open

    def __call__(self, t: Tensor) -> Tensor:
        return self.fn(t)


Edit = SiteEdit | Callable[[Tensor], Tensor]  # a plain function f is SiteEdit(f): it keeps rows, as is safe
Where = tuple[str, int, str] | str  # (kind, layer, site), or a model site


def attention_modules(model: Transformer, kind: str) -> list[MultiHeadAttention]:
    """The attention modules of one kind, layer by layer."""
    if kind == "encoder":
        return [layer.self_attn for layer in model.encoder_layers]
    return [layer.self_attn if kind == "decoder" else layer.cross_attn for layer in model.decoder_layers]


def attention_blocks(model: Transformer, kind: str) -> list[Residual]:
    """The residual blocks around the attention modules of one kind, layer by layer."""
    if kind == "encoder":
        return [layer.attn_block for layer in model.encoder_layers]
    return [layer.self_block if kind == "decoder" else layer.cross_block for layer in model.decoder_layers]


def _tensors(self) -> dict[str, Tensor]:
    return {f.name: getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Tensor)}


# The sites of one attention layer in one pass, a field per site of SITES (None where not reached).
LayerTrace = make_dataclass(
    "LayerTrace",
    [("kind", str), ("layer", int), ("module", MultiHeadAttention), ("block", Residual)]
    + [(name, Tensor | None, field(default=None)) for name in LAYER_SITES],
    namespace={"tensors": _tensors, "__doc__": "The sites of one attention layer in one pass (SITES gives shapes)."},
)


@dataclass
class Trace:
    """A traced forced pass of (src, tgt_in): the logits, the embeddings and every attention
    layer's sites, `layers[kind][layer]`."""

    src: Tensor  # (B, S) ids
    tgt: Tensor  # (B, T) ids, tgt_in
    logits: Tensor  # (B, T, V)
    src_embedded: Tensor
    tgt_embedded: Tensor
    layers: dict[str, list[LayerTrace]]

    def __getitem__(self, where: tuple[str, int]) -> LayerTrace:
        kind, layer = where
        return self.layers[kind][layer]

    def weights(self) -> AttentionWeights:
        """Every layer's weights, as the model returns them with need_weights=True."""
        return AttentionWeights(*([t.weights for t in self.layers[kind]] for kind in KINDS))


def site_modules(model: Transformer) -> dict[Where, nn.Module]:
    """The module at each site, whose output is the site's tensor: each attention layer's Sites
    (its attention's and its residual block's, qkvmt.model.sites) and the model's embeddings."""
    modules: dict[Where, nn.Module] = {}
    for kind in KINDS:
        for layer, (module, block) in enumerate(zip(attention_modules(model, kind), attention_blocks(model, kind))):
            modules |= {(kind, layer, name): site for name, site in [*module.sites.items(), *block.sites.items()]}
    return modules | {"src_embedded": model.src_embed, "tgt_embedded": model.tgt_embed}


def site_edit(edit: Edit) -> SiteEdit:
    """`edit` as a SiteEdit: a plain function with SiteEdit's defaults."""
    return edit if isinstance(edit, SiteEdit) else SiteEdit(edit)


def then(first: Edit, second: Edit) -> SiteEdit:
    """Two edits of one site, one after the other: what either says of a search, both say."""
    first, second = site_edit(first), site_edit(second)

    def both(t: Tensor) -> Tensor:
        return second(first(t))

    return SiteEdit(both, first.indexes_queries or second.indexes_queries, first.keeps_rows or second.keeps_rows)


def query_positional(edits: Iterable[Edit]) -> bool:
    """Whether any of `edits` indexes the queries by position (search must then run uncached)."""
    return any(site_edit(edit).indexes_queries for edit in edits)


def _paths(model: Transformer, edits: dict[Where, SiteEdit]) -> list:
    """The one place that picks an attention layer's path while edits are open: a layer with an
    edit at a site of the explicit path only (SITES' explicit_only) runs that path, which the fused
    kernel would skip; every other layer runs the path its caller asked for."""
    hooks = []
    for kind in KINDS:
        for layer, module in enumerate(attention_modules(model, kind)):
            explicit = [edits[w] for w in [(kind, layer, name) for name in EXPLICIT_ONLY] if w in edits]
            if explicit:
                hooks.append(before(module, _explicit((kind, layer), query_positional(explicit)), with_kwargs=True))
    return hooks


def _explicit(where: tuple[str, int], positional: bool):
    def hook(module, args, kwargs):
        if positional and kwargs.get("cache") is not None:
            raise UserError(
                f"an edit of query positions in {where[0]} layer {where[1]} cannot follow cached decoding, "
                "whose queries arrive one step at a time: decode with use_cache=False"
            )
        return args, {**kwargs, "need_weights": True}

    return hook


def _hooks(model: Transformer, read: Callable[[Where, Tensor], None] | None, edits: dict[Where, SiteEdit]) -> list:
    """Hooks that replace each edited site's tensor by its edit and report every site's to `read`
    (None: only the edited sites are hooked), and those that pick the edited layers' path."""

    def hook_of(where: Where):
        edit = edits.get(where)

        def site_value(module, args, t: Tensor) -> Tensor:
            if edit is not None:
                t = edit(t)
            if read is not None:
                read(where, t)
            return t

        return site_value

    hooks = [after(m, hook_of(w)) for w, m in site_modules(model).items() if read is not None or w in edits]
    return hooks + _paths(model, edits)


def _checked(model: Transformer, edits: dict[Where, Edit]) -> dict[Where, SiteEdit]:
    """`edits` as SiteEdits, each site checked and its layer counted from the start."""
    for where in edits:
        if isinstance(where, str):
            if where not in MODEL_SITES:
                raise ValueError(f"no model site {where!r}: use one of {', '.join(MODEL_SITES)}")
            continue
        kind, layer, name = where
        if (
            kind not in KINDS
            or name not in WRITABLE
            or not -len(attention_modules(model, kind)) <= layer < len(attention_modules(model, kind))
        ):
            raise ValueError(
                f"no writable site {where!r}: a kind of {KINDS}, a layer of it, and one of {', '.join(WRITABLE)}"
            )
    return {
        (w if isinstance(w, str) else (w[0], w[1] % len(attention_modules(model, w[0])), w[2])): site_edit(f)
        for w, f in edits.items()
    }


@contextlib.contextmanager
def edited(model: Transformer, edits: dict[Where, Edit]):
    """Within the block, each site's tensor is replaced by edit(tensor), on every path, search
    included: a layer whose explicit-path sites (SITES' explicit_only) are edited runs that path,
    and while any edit keeps rows, no sentence leaves a search's batch."""
    checked = _checked(model, edits)
    hooks = _hooks(model, None, checked)
    try:
        with rows_kept() if any(e.keeps_rows for e in checked.values()) else contextlib.nullcontext():
            yield
    finally:
        for h in hooks:
            h.remove()


def trace(
    model: Transformer,
    src: Tensor,
    tgt: Tensor,
    edits: dict[Where, Edit] | None = None,
    grad_of: tuple[int, int] | None = None,
) -> Trace:
    """Trace one teacher-forced pass of src (B, S) and tgt_in (B, T), with `edits` applied.

    grad_of=(t, token): the pass runs with gradients, and every site's tensor of batch row 0
    holds in `.grad` the gradient of log p(token) at target row t."""
    seen: dict[Where, Tensor] = {}

    def read(where: Where, t: Tensor | None) -> None:
        if t is not None and grad_of is not None and t.requires_grad:
            t.retain_grad()
        seen[where] = t

    hooks = _hooks(model, read, _checked(model, edits or {}))
    try:
        with torch.set_grad_enabled(grad_of is not None):
            logits, _ = model(src, tgt, need_weights=True)
            if grad_of is not None:
                row, token = grad_of
                logits[0, row].float().log_softmax(-1)[token].backward()
    finally:
        for h in hooks:
            h.remove()
    layers = {
        kind: [
            LayerTrace(
                kind,
                layer,
                module,
                block,
                **{name: seen.get((kind, layer, name)) for name in LAYER_SITES},
            )
            for layer, (module, block) in enumerate(zip(attention_modules(model, kind), attention_blocks(model, kind)))
        ]
        for kind in KINDS
    }
    return Trace(src, tgt, logits, seen["src_embedded"], seen["tgt_embedded"], layers)
