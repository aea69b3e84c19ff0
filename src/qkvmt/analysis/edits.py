"""Typed edits of a trained model's attention: what `Model.intervene` applies.

Each edit names what it changes in words a user asks about (the keys or the values of two source
words, a head's output, one query's view of one key) and compiles to functions of the sites of
qkvmt.model.sites (qkvmt.analysis.trace.edited writes them, in forced passes and in search):

    Swap(a, b, what)       the keys, the values or both of source positions a and b trade places
    Zero(what)             heads' values, or their outputs (their slice of W_O's input), set to 0
    Patch(donor, what)     keys, values or both at some source positions taken from a second
                           source sentence's pass (activation patching)
    Knockout(query, key)   one query may not attend to one key (attention knockout)

Each site function is a SiteEdit that does the same to every row of the batch, so a search under
it lets the sentences that are done leave (keeps_rows=False); a Knockout names queries by position.

Positions are token positions, as the attention maps label them: source tokens x_1 .. x_n </s>
for keys; for a decoder or cross-attention query, the row that predicts output token `query`.
`layers` and `heads` are tuples (None: every one; one number is a tuple of one); negative layers
count from the end. Every field is checked for its type as the edit is made, and against the
model as it compiles (qkvmt.analysis.edit_scope: the scope and the checks every edit shares).

An edit written as data, {name: {field: value}} (`qkvmt intervene edits=[...]`, the explorer's
what-if request), is read into these dataclasses by `edit_of` below: one parser for every surface,
so they accept and refuse alike, and one set of checks, the dataclasses' own.
"""

from dataclasses import dataclass, fields

import torch
from tokenizers import Tokenizer
from torch import Tensor

from qkvmt.analysis.edit_scope import Scope, Shape, choice, in_range
from qkvmt.analysis.trace import SiteEdit, Where, then, trace
from qkvmt.errors import UserError
from qkvmt.model.inputs import build_inputs
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import encode

PARTS = ("keys", "values", "both")  # what a Swap or a Patch exchanges
SITES_OF = {"keys": ("k",), "values": ("v",), "both": ("k", "v")}
SOURCE_KINDS = ("cross", "encoder")  # the attention whose keys are source tokens: what a Swap or a Patch acts on
ZERO_PARTS = ("values", "output")


def exchanged(t: Tensor, a: int | Tensor, b: int | Tensor, heads: list[int] | None = None) -> Tensor:
    """A copy of a site t (B, H, T_k, d_k) whose key positions a and b trade places in `heads`
    (None: every head). a and b: one position for every row, or one per row, (B,) each."""
    rows = torch.arange(t.size(0), device=t.device)[:, None]  # (B, 1)
    a, b = (torch.as_tensor(p, device=t.device).expand(t.size(0))[:, None] for p in (a, b))  # (B, 1) each
    h = torch.arange(t.size(1), device=t.device) if heads is None else torch.tensor(heads, device=t.device)
    out = t.clone()
    out[rows, h, a], out[rows, h, b] = t[rows, h, b], t[rows, h, a]  # each (B, heads, d_k)
    return out


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

    def compile(self, shape: Shape, prepared: None = None) -> dict[Where, SiteEdit]:
        layers, heads = self.chosen(shape, SOURCE_KINDS)
        a, b = self.position("a", "key", shape), self.position("b", "key", shape)
        if a == b:
            raise UserError(
                f"Swap.a={self.a} and Swap.b={self.b} are the same source token ({a}): pick two different tokens"
            )

        def swap(t: Tensor) -> Tensor:  # (B, H, T_k, d_k)
            return exchanged(t, a, b, heads)

        return {
            (self.kind, i, s): SiteEdit(swap, keeps_rows=False)
            for i in layers
            for s in SITES_OF[choice("Swap.what", self.what, PARTS)]
        }


@dataclass(frozen=True)
class Zero(Scope):
    """Heads' values ("values": every key's v) or outputs ("output": their slice of W_O's input)
    set to zero, so the head hands nothing over."""

    what: str = "output"

    def compile(self, shape: Shape, prepared: None = None) -> dict[Where, SiteEdit]:
        layers, heads = self.chosen(shape)
        if choice("Zero.what", self.what, ZERO_PARTS) == "values":

            def zero(t: Tensor) -> Tensor:  # (B, H, T_k, d_k)
                t = t.clone()
                t[:, heads] = 0
                return t

            return {(self.kind, i, "v"): SiteEdit(zero, keeps_rows=False) for i in layers}
        keep = torch.ones(shape.heads, shape.d_k)
        keep[heads] = 0

        def silence(t: Tensor) -> Tensor:  # (B, T_q, D)
            return t * keep.flatten().to(t.device, t.dtype)

        return {(self.kind, i, "heads"): SiteEdit(silence, keeps_rows=False) for i in layers}


@dataclass(frozen=True)
class Patch(Scope):
    """Keys, values or both at source `positions` replaced by those a second source sentence
    (`donor`) gives there: activation patching. The donor must split into as many tokens;
    positions None: every position whose token differs."""

    donor: str = ""
    what: str = "values"
    positions: tuple[int, ...] | None = None

    def prepare(self, model: Transformer, tokenizer: Tokenizer, src_ids: list[int]) -> "Donor":
        """The donor run through the encoder (and every cross-attention's keys and values), and
        where its tokens differ from the edited sentence's, `src_ids`."""
        if not self.donor.strip():
            raise UserError("Patch needs a donor: a second source sentence, e.g. Patch('Eine Katze schläft .')")
        ids = encode(tokenizer, [self.donor])[0]
        if len(ids) != len(src_ids):
            raise UserError(
                f"the donor {self.donor!r} splits into {len(ids)} tokens and the sentence into {len(src_ids)}: "
                "patching needs as many (replace a word by one of as many subwords)"
            )
        c, device = model.cfg, next(model.parameters()).device
        x = build_inputs([ids], [[]], c.specials, c.max_positions)
        traced = trace(model, x.src.to(device), x.tgt_in.to(device))
        sites = {
            (kind, i, s): getattr(traced[kind, i], s)
            for kind in SOURCE_KINDS
            for i in range(len(traced.layers[kind]))
            for s in "kv"
        }
        return Donor(sites, [p for p, (a, b) in enumerate(zip(ids, src_ids)) if a != b])

    def compile(self, shape: Shape, donor: "Donor") -> dict[Where, SiteEdit]:
        layers, heads = self.chosen(shape, SOURCE_KINDS)
        choice("Patch.what", self.what, PARTS)
        if self.positions is None and not donor.differs:
            raise UserError(f"the donor {self.donor!r} has the sentence's own tokens: nothing to patch")
        given = list(self.positions) if self.positions is not None else donor.differs
        if not given:
            raise UserError("Patch names no position: leave positions unset for every one whose token differs")
        positions = [in_range("Patch.positions", p, shape.src_len, "the source tokens") for p in given]
        donor_sites = donor.sites

        def patched(where):
            donor = donor_sites[where]

            def patch(t: Tensor) -> Tensor:  # (B, H, S, d_k)
                h, p = torch.tensor(heads)[:, None], torch.tensor(positions)[None, :]  # every head at every position
                t = t.clone()
                t[:, h, p] = donor[:, h, p].to(t.dtype).expand(t.size(0), -1, -1, -1)
                return t

            return SiteEdit(patch, keeps_rows=False)

        return {w: patched(w) for i in layers for w in [(self.kind, i, s) for s in SITES_OF[self.what]]}


@dataclass(frozen=True)
class Knockout(Scope):
    """Query position `query` may not attend to key position `key`, in every head of the chosen
    layers (the mask is the heads' own). A decoder or cross-attention query is the row that
    predicts output token `query`."""

    query: int = 0
    key: int = 0

    def compile(self, shape: Shape, prepared: None = None) -> dict[Where, SiteEdit]:
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

        # cached search sees one query at a time: edited() refuses it there
        return {(self.kind, i, "mask"): SiteEdit(knockout, indexes_queries=True, keeps_rows=False) for i in layers}


@dataclass(frozen=True)
class Donor:
    """A Patch's second sentence, run: its sites (kind, layer, "k" or "v") -> (1, H, S, d_k), and
    the source positions whose token differs from the edited sentence's."""

    sites: dict[tuple[str, int, str], Tensor]
    differs: list[int]


EDITS = (Swap, Zero, Patch, Knockout)


def prepared(edits, model: Transformer, tokenizer: Tokenizer, src_ids: list[int]) -> dict:
    """Each edit's `prepare` for the sentence `src_ids`, by id(): what `compiled` takes. Anything
    but an edit is left for `compiled` to refuse, in its turn."""
    return {id(edit): edit.prepare(model, tokenizer, src_ids) for edit in edits if isinstance(edit, EDITS)}


def compiled(edits, shape: Shape, ready: dict | None = None) -> dict[Where, SiteEdit]:
    """The site functions of `edits`, in order; two edits of one site apply one after the other.
    ready: what each edit's `prepare` gave (a Patch's Donor), by id(), as `prepared` makes it."""
    out: dict[Where, SiteEdit] = {}
    for edit in edits:
        if not isinstance(edit, EDITS):
            raise UserError(f"{edit!r} is not an edit: give {', '.join(e.__name__ for e in EDITS)} objects")
        for where, fn in edit.compile(shape, (ready or {}).get(id(edit))).items():
            before = out.get(where)
            out[where] = fn if before is None else then(before, fn)
    return out


# Edits written as data. The name of each is its class name in lower case, so a new type in EDITS
# is a name here with nothing else to add.
EDIT_TYPES = {cls.__name__.lower(): cls for cls in EDITS}
EXAMPLE = "edits=[{swap: {a: 1, b: 6, what: keys}}]"


def field_names(cls) -> list[str]:
    """An edit's fields as a user names them: its own first, then the scope every edit shares."""
    return [f.name for f in fields(cls) if not f.kw_only] + [f.name for f in fields(cls) if f.kw_only]


def edit_of(item, where: str):
    """One edit written as data, {name: {field: value}}, as its dataclass, every field's type
    checked (its values are checked against the model when it compiles); `where` names the item
    in the one-line UserError."""
    if not isinstance(item, dict) or len(item) != 1:
        raise UserError(
            f"{where}={item!r}: give one edit as {{name: {{field: value, ...}}}}, e.g. {EXAMPLE}; "
            f"the edits are {', '.join(EDIT_TYPES)}"
        )
    ((name, given),) = item.items()
    if name not in EDIT_TYPES:
        raise UserError(f"{where}: no edit {name!r}; use one of {', '.join(EDIT_TYPES)}")
    given = {} if given is None else given  # {swap: null}: every field at its default
    cls, names = EDIT_TYPES[name], field_names(EDIT_TYPES[name])
    if not isinstance(given, dict):
        raise UserError(f"{where}.{name}={given!r}: give its fields, {{{', '.join(f'{n}: ...' for n in names)}}}")
    unknown = [k for k in given if k not in names]
    if unknown:
        raise UserError(f"{where}.{name}.{unknown[0]}: {name} has no such field; its fields are {', '.join(names)}")
    return cls(**given)


def edits_of(given) -> list:
    """A list of edits written as data (`edit_of` each), checked before any model is loaded."""
    if not given:
        raise UserError(f"no edits given: give a list of {', '.join(EDIT_TYPES)}, e.g. '{EXAMPLE}'")
    if not isinstance(given, list):
        raise UserError(f"edits={given!r}: give a list of edits in brackets, e.g. '{EXAMPLE}'")
    return [edit_of(item, f"edits[{i}]") for i, item in enumerate(given)]
