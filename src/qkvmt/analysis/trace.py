"""One teacher-forced pass, traced: what every attention layer computed, at named sites.

The sites of each (kind, layer), kind one of KINDS, and of the model are qkvmt.model.sites.SITES:
their names, axes and where each is reached. A trace also keeps the logits (B, T, V).

`trace()` reads every site of the attention layers in one pass; `edited()` replaces the tensor at
any site while its block is open: head masking, value zeroing, deleted source tokens and the
interventions of qkvmt.analysis.edits all write through it, in forced passes and in search alike.
Both are users of the hooks by name (qkvmt.analysis.hooking), which a researcher's own functions
run on too: a site (kind, layer, name) is the hook point `encoder.{layer}.self.{name}`,
`decoder.{layer}.self.{name}` or `decoder.{layer}.cross.{name}` (`hook_name`). An edit of a site
that fires only on the explicit path (Q, K, V, the mask, the scores, the weights) switches its
layer to that path while the block is open, so it takes effect under search's fused kernel too.
Nothing stays on the model, and the hooks fire in the calling thread only (qkvmt.analysis.hooks).

An edit is a SiteEdit (a plain function stands for one with its defaults): the function, and
what a search must know of it, said as fields, not read off the model: whether it names queries
by position (cached search, one query a step, refuses it) and whether it keeps rows (while it is
open no sentence leaves a search's batch, qkvmt.decoding.rows).
"""

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, make_dataclass

import torch
from torch import Tensor

from qkvmt.analysis.hooking import hooked
from qkvmt.decoding.rows import rows_kept
from qkvmt.model.attention import MultiHeadAttention
from qkvmt.model.layers import Residual
from qkvmt.model.sites import LAYER_SITES, MODEL_SITES
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


def hook_name(where: Where) -> str:
    """The hook point of a site (kind, layer, name), or of a model site (its embeddings)."""
    if isinstance(where, str):
        return {"src_embedded": "encoder.embed", "tgt_embedded": "decoder.embed"}[where]
    kind, layer, name = where
    return (
        f"encoder.{layer}.self.{name}"
        if kind == "encoder"
        else f"decoder.{layer}.{'cross' if kind == 'cross' else 'self'}.{name}"
    )


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


def _checked(model: Transformer, edits: dict[Where, Edit]) -> dict[Where, SiteEdit]:
    """`edits` as SiteEdits, each site checked and its layer counted from the start."""
    for where in edits:
        if isinstance(where, str):
            if where not in MODEL_SITES:
                raise ValueError(f"no model site {where!r}: use one of {', '.join(MODEL_SITES)}")
            continue
        kind, layer, name = where
        n = len(attention_modules(model, kind)) if kind in KINDS else 0
        if kind not in KINDS or name not in LAYER_SITES or (kind, name) == ("encoder", "y") or not -n <= layer < n:
            raise ValueError(
                f"no site {where!r}: a kind of {KINDS}, a layer of it, and one of {', '.join(LAYER_SITES)}"
            )
    return {
        (w if isinstance(w, str) else (w[0], w[1] % len(attention_modules(model, w[0])), w[2])): site_edit(f)
        for w, f in edits.items()
    }


def _as_hooks(edits: dict[Where, SiteEdit]) -> tuple[dict, list[str]]:
    """The hooks by name that apply `edits` (each a function of the tensor alone), and the names
    of those that index queries by position."""
    hooks = {hook_name(w): [lambda t, ctx, edit=edit: edit(t)] for w, edit in edits.items()}
    return hooks, [hook_name(w) for w, edit in edits.items() if edit.indexes_queries]


@contextlib.contextmanager
def edited(model: Transformer, edits: dict[Where, Edit]):
    """Within the block, each site's tensor is replaced by edit(tensor), on every path, search
    included: a layer whose explicit-path sites (SITES' explicit_only) are edited runs that path,
    and while any edit keeps rows, no sentence leaves a search's batch."""
    checked = _checked(model, edits)
    hooks, positional = _as_hooks(checked)
    keep = rows_kept() if any(e.keeps_rows for e in checked.values()) else contextlib.nullcontext()
    with hooked(model, hooks, refuse_cached=positional), keep:
        yield


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
    sites = [
        (kind, i, name)
        for kind in KINDS
        for i in range(len(attention_modules(model, kind)))
        for name in LAYER_SITES
        if name != "y" or kind == "cross"  # self-attention has no y
    ]
    names = {hook_name(w): w for w in [*MODEL_SITES, *sites]}
    seen: dict[Where, Tensor] = {}

    def read(name: str, t: Tensor) -> None:
        if grad_of is not None and t.requires_grad:
            t.retain_grad()
        seen[names[name]] = t

    hooks, positional = _as_hooks(_checked(model, edits or {}))
    with hooked(model, hooks, read, names, refuse_cached=positional), torch.set_grad_enabled(grad_of is not None):
        logits, _ = model(src, tgt, need_weights=True)
        if grad_of is not None:
            row, token = grad_of
            logits[0, row].float().log_softmax(-1)[token].backward()
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
