"""Every activation of a model by a plain name a user can type, filter and glob.

    encoder.embed                      the source embeddings with their positions
    encoder.{i}.resid_pre              the stream entering encoder layer i
    encoder.{i}.self.{site}            its self-attention: x, q, k, v, mask, scores, weights, heads, out,
                                       and its residual block: resid_pre, norm, resid_post
    encoder.{i}.ffn.{site}             its feed-forward: in, hidden, out, and its block's resid_pre, norm, resid_post
    encoder.{i}.resid_post             the stream leaving it
    encoder.out                        the encoder's output (the memory cross-attention reads)
    decoder.embed, decoder.{i}.…       the same for the decoder, whose layers also have cross.{site} (with y)
    decoder.out, logits                the decoder's final states and the output layer's scores

The sites and their axes are qkvmt.model.sites.SITES; this module only lays them over a model's
layers, in the order a forward pass reaches them. Some names hold one tensor: a layer's resid_pre is
its first block's, its resid_post its feed-forward block's, and a post-LN block's norm is its
resid_post. Each is its own point, so a hook on one changes what the later ones see.

A glob matches a name part by part, as a path does: `*` stands for any text within one part,
`decoder.*.cross.v` for every decoder layer's cross-attention values, and `**` for any number of
parts (`**.weights`: every attention's weights).
"""

import difflib
import fnmatch
from dataclasses import dataclass

from torch import nn

from qkvmt.errors import UserError
from qkvmt.model.sites import SITES, SiteSpec

SPECS = {(s.scope, s.name): s for s in SITES}
# Which side's tokens label each position axis, per part of a layer: (query or position, key).
SIDES = {("encoder", "self"): ("source", "source"), ("decoder", "self"): ("target", "target")}
SIDES |= {("decoder", "cross"): ("target", "source")}


@dataclass(frozen=True)
class HookPoint:
    """One named activation: its site, the module it passes, and where it is in the model."""

    name: str
    spec: SiteSpec
    module: nn.Module
    stack: str  # "encoder" or "decoder": whose positions its position axis counts
    layer: int | None  # None: a site of the model, not of a layer
    part: str | None  # "self", "cross" or "ffn" within a layer; None: the layer's own or the model's
    attention: nn.Module | None = None  # for an attention site, its MultiHeadAttention

    def side(self, axis: str) -> str | None:
        """Whose tokens label `axis`: "source", "target", or None for an axis of features or heads."""
        if axis == "position":
            return "source" if self.stack == "encoder" else "target"
        if axis in ("query", "key"):
            return SIDES[self.stack, self.part][axis == "key"]
        return None


def _block(prefix: str, stack: str, layer: int, part: str, block, inner) -> list[HookPoint]:
    """A sub-layer's points in the order a pass reaches them: the block's stream in, its norm (pre-LN,
    before the sub-layer), the sub-layer's own sites (`inner`'s: an attention, or the feed-forward), the
    norm (post-LN), the stream out."""
    scope, attention = ("ffn", None) if part == "ffn" else ("attention", inner)
    own = [s for s in SITES if s.scope == scope and not (s.name == "y" and part == "self")]
    pre, post = (["norm"], []) if block.norm_first else ([], ["norm"])

    def point(spec, module):
        return HookPoint(f"{prefix}.{part}.{spec.name}", spec, module, stack, layer, part, attention)

    block_point = [point(SPECS["block", n], block.sites[n]) for n in ("resid_pre", *pre)]
    tail = [point(SPECS["block", n], block.sites[n]) for n in (*post, "resid_post")]
    return block_point + [point(s, inner.sites[s.name]) for s in own] + tail


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every point of `model` (a qkvmt Transformer) by name, in the order a forward pass reaches them."""
    points: list[HookPoint] = []

    def model_point(name, scope_name, module, stack):
        points.append(HookPoint(name, SPECS["model", scope_name], module, stack, None, None))

    for stack, embed, layers in (
        ("encoder", model.src_embed, model.encoder_layers),
        ("decoder", model.tgt_embed, model.decoder_layers),
    ):
        model_point(f"{stack}.embed", "embed", embed, stack)
        for i, layer in enumerate(layers):
            prefix = f"{stack}.{i}"
            points.append(
                HookPoint(f"{prefix}.resid_pre", SPECS["layer", "resid_pre"], layer.sites["resid_pre"], stack, i, None)
            )
            parts = [("self", layer.attn_block if stack == "encoder" else layer.self_block, layer.self_attn)]
            if stack == "decoder":
                parts.append(("cross", layer.cross_block, layer.cross_attn))
            for part, block, inner in [*parts, ("ffn", layer.ffn_block, layer.ffn)]:
                points += _block(prefix, stack, i, part, block, inner)
            points.append(
                HookPoint(
                    f"{prefix}.resid_post", SPECS["layer", "resid_post"], layer.sites["resid_post"], stack, i, None
                )
            )
        model_point(f"{stack}.out", "out", model.sites[f"{stack}_out"], stack)
    model_point("logits", "logits", model.sites["logits"], "decoder")
    return {p.name: p for p in points}


def glob_matches(pattern: str, name: str) -> bool:
    """Whether `name` matches `pattern` part by part: `*` within a part, `**` for any number of parts."""
    return _parts_match(pattern.split("."), name.split("."))


def _parts_match(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_parts_match(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _parts_match(pattern[1:], parts[1:])


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def resolved(patterns, points: dict[str, HookPoint], what: str = "name") -> dict[str, list[str]]:
    """Each pattern (a name or a glob) -> the names it stands for, in forward order; an unknown name is
    a one-line UserError listing the close ones, a glob that matches nothing one naming it."""
    out = {}
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise UserError(f"{what} {pattern!r}: give an activation's name as text, e.g. 'decoder.0.cross.v'")
        if not is_glob(pattern):
            if pattern not in points:
                close = difflib.get_close_matches(pattern, list(points), n=5, cutoff=0.6)
                hint = f"close names: {', '.join(close)}" if close else "model.hook_names() lists them all"
                raise UserError(f"{what} {pattern!r}: no activation has that name; {hint}")
            out[pattern] = [pattern]
            continue
        matched = [n for n in points if glob_matches(pattern, n)]
        if not matched:
            raise UserError(
                f"{what} {pattern!r} matches no activation: a * stands for text within one part of a name "
                "(decoder.*.cross.v), ** for any number of parts (**.weights); model.hook_names() lists them"
            )
        out[pattern] = matched
    return out
