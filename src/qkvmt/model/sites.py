"""Named points inside the forward pass where a tensor may be read and replaced: the one table of them.

Every site is an identity module (`Site`) the tensor passes through: an attention's
(`MultiHeadAttention.sites`), a residual block's around a sub-layer (`Residual.sites`), the
feed-forward's (`FeedForward.sites`), a layer's (`EncoderLayer.sites`, `DecoderLayer.sites`) or the
model's (`Transformer.sites`, and its embedding modules, whose outputs are sites). With no hook
attached a Site returns its input untouched; a forward hook on it sees the tensor, or returns another
one in its place. So every site is read and written alike, by a hook on its module.

SITES says, per site: its name, where it lives (`scope`), its axes by name, where it is reached and
what it holds. The hook names users type (qkvmt.model.hook_names: `decoder.1.cross.v`,
`encoder.0.ffn.out`, `logits`) are drawn from it, and so are a trace's fields
(qkvmt.analysis.trace.LayerTrace) and the table of the docs. The sites `explicit_only` are on the
explicit attention path only (the one that returns weights); the fused kernel, which training and
search run, never calls them, so a hook on one switches its layer to the explicit path while it is
open (qkvmt.analysis.hooking decides, in one place).

Axes: batch (a sentence, or in search a beam of one), head, query and key (positions of the
attention's queries and keys), position (of the stream a site is on: the source's in the encoder, the
target's in the decoder), d_k, d_model, ffn (the feed-forward's hidden width), vocab.
"""

from dataclasses import dataclass

from torch import Tensor, nn
from torch.nn.modules import module as torch_module

# Where a site lives: in an attention (self or cross), in the residual block around any sub-layer
# (self, cross or ffn), in the feed-forward, in a layer, or in the model.
SCOPES = ("attention", "block", "ffn", "layer", "model")


@dataclass(frozen=True)
class SiteSpec:
    name: str
    scope: str  # one of SCOPES
    axes: tuple[str, ...]
    explicit_only: bool  # fires only on the explicit attention path (a hook on it switches its layer there)
    meaning: str

    @property
    def shape(self) -> str:
        return f"({', '.join(self.axes)})"


ROWS, HEADS, STREAM = ("batch", "head", "query"), ("batch", "head"), ("batch", "position", "d_model")
QUERIES = ("batch", "query", "d_model")
SITES = (
    SiteSpec("x", "attention", QUERIES, False, "the attention's query input"),
    SiteSpec("y", "attention", ("batch", "key", "d_model"), False, "cross-attention's key and value input"),
    SiteSpec("q", "attention", (*ROWS, "d_k"), True, "the queries per head, positions applied"),
    SiteSpec("k", "attention", (*HEADS, "key", "d_k"), True, "the keys per head, positions applied"),
    SiteSpec("v", "attention", (*HEADS, "key", "d_k"), True, "the values per head"),
    SiteSpec(
        "mask", "attention", (*ROWS, "key"), True, "bool, True where a query may attend to a key (one head, shared)"
    ),
    SiteSpec("scores", "attention", (*ROWS, "key"), True, "QKᵀ/√d_k, -inf where the mask is False"),
    SiteSpec("weights", "attention", (*ROWS, "key"), True, "the scores' softmax over the keys"),
    SiteSpec("heads", "attention", QUERIES, False, "the heads' outputs side by side: W_O's input"),
    SiteSpec("out", "attention", QUERIES, False, "W_O(heads) + b_O, the attention's output"),
    SiteSpec("resid_pre", "block", STREAM, False, "the residual stream entering the sub-layer's block"),
    SiteSpec("norm", "block", STREAM, False, "the block's LayerNorm output (pre-LN: the sub-layer's input)"),
    SiteSpec("resid_post", "block", STREAM, False, "the residual stream leaving the block (post-LN: normed)"),
    SiteSpec("in", "ffn", STREAM, False, "the feed-forward's input"),
    SiteSpec("hidden", "ffn", ("batch", "position", "ffn"), False, "the activation of its first layer"),
    SiteSpec("out", "ffn", STREAM, False, "its output, before the residual connection"),
    SiteSpec("resid_pre", "layer", STREAM, False, "the residual stream entering the layer"),
    SiteSpec("resid_post", "layer", STREAM, False, "the residual stream leaving the layer"),
    SiteSpec("embed", "model", STREAM, False, "the token embeddings with their positions (one per stack)"),
    SiteSpec("out", "model", STREAM, False, "a stack's last states, after its final LayerNorm where it has one"),
    SiteSpec("logits", "model", ("batch", "position", "vocab"), False, "the output layer's scores"),
)


def names_in(scope: str) -> tuple[str, ...]:
    return tuple(s.name for s in SITES if s.scope == scope)


ATTENTION_SITES, BLOCK_SITES, FFN_SITES, LAYER_ONLY_SITES = (names_in(s) for s in SCOPES[:4])
LAYER_SITES = ATTENTION_SITES + BLOCK_SITES  # what a trace keeps of each attention layer (with its block)
EXPLICIT_ONLY = tuple(s.name for s in SITES if s.explicit_only)
MODEL_SITES = ("src_embedded", "tgt_embedded")  # a trace's names of the two embeddings (encoder.embed, decoder.embed)


def sites(names) -> nn.ModuleDict:
    """A Site per name: no parameters, so checkpoints are unchanged."""
    return nn.ModuleDict({name: Site() for name in names})


class Site(nn.Module):
    """The identity, where a hook may read and replace what passes."""

    def forward(self, x: Tensor) -> Tensor:
        return x

    def __call__(self, x: Tensor) -> Tensor:
        # A decoding step passes some 20 sites a layer: with no hook to run, nn.Module's call (a few
        # microseconds each) is skipped, a fifth of a small model's step.
        if self._forward_hooks or self._forward_pre_hooks or any_global_hook():
            return super().__call__(x)
        return x


def any_global_hook() -> bool:
    """Whether a forward hook registered for every module (torch.nn.modules.module's own) would fire."""
    return bool(torch_module._global_forward_hooks or torch_module._global_forward_pre_hooks)
