"""Named points inside the forward pass where a trace reads a tensor and an edit replaces it.

SITES is the one table of them: each site's name, shape, where it is reached, whether an edit
may replace it, and on which path it fires. A trace's fields (qkvmt.analysis.trace.LayerTrace),
the hooks that read and write them, the identity modules an attention layer carries and the
checks on an edit are all drawn from it.

Every site of a layer is an identity module (`Site`) where the tensor passes: the attention's
(`MultiHeadAttention.sites`) or the residual block's around it (`AttentionBlock.sites`). With no
hook attached it returns its input untouched, and a forward hook on it sees the tensor, or
returns another one in its place; a model site is the output of its embedding module. So every
site is read and written alike, by a hook on its module. The sites `explicit_only` are on the
explicit path only (the one that returns weights); the fused kernel, which training and search
run, never calls them. An edit of one of them switches its layer to the explicit path for as long
as the edit is open (qkvmt.analysis.trace decides, in one place).
"""

from dataclasses import dataclass

from torch import Tensor, nn


@dataclass(frozen=True)
class SiteSpec:
    name: str
    shape: str
    reached: str  # where its Site passes the tensor: "site": inside the attention; "input", "w_o input",
    # "output": the attention's own input, W_O's input, its output; "block input", "block output": of
    # the residual block around it; "embedding": the model's embedding module (the site is its output)
    writable: bool
    explicit_only: bool  # fires only on the explicit path (an edit of it switches its layer there)
    meaning: str


SITES = (
    SiteSpec("x", "(B, T_q, D)", "input", False, False, "the attention's query input"),
    SiteSpec("y", "(B, T_k, D)", "input", False, False, "cross-attention's key and value input (None in self)"),
    SiteSpec("q", "(B, H, T_q, d_k)", "site", True, True, "the queries per head, positions applied"),
    SiteSpec("k", "(B, H, T_k, d_k)", "site", True, True, "the keys per head, positions applied"),
    SiteSpec("v", "(B, H, T_k, d_k)", "site", True, True, "the values per head"),
    SiteSpec("mask", "(B, 1, T_q, T_k)", "site", True, True, "bool, True where a query may attend to a key"),
    SiteSpec("scores", "(B, H, T_q, T_k)", "site", True, True, "QKᵀ/√d_k, -inf where the mask is False"),
    SiteSpec("weights", "(B, H, T_q, T_k)", "site", True, True, "the scores' softmax over the keys"),
    SiteSpec("heads", "(B, T_q, D)", "w_o input", True, False, "the heads' outputs side by side: W_O's input"),
    SiteSpec("attention", "(B, T_q, D)", "output", True, False, "W_O(heads) + b_O, the attention's output"),
    SiteSpec("residual", "(B, T_q, D)", "block input", False, False, "the residual stream entering the block"),
    SiteSpec("block_out", "(B, T_q, D)", "block output", True, False, "what leaves the block (post-LN: normed)"),
)
MODEL_SITE_SPECS = (
    SiteSpec("src_embedded", "(B, S, D)", "embedding", True, False, "the source embeddings with their positions"),
    SiteSpec("tgt_embedded", "(B, T, D)", "embedding", True, False, "the target embeddings with their positions"),
)

LAYER_SITES = tuple(s.name for s in SITES)
BLOCK_PLACES = ("block input", "block output")  # where the residual block's Sites are; the rest are the attention's
ATTENTION_SITES = tuple(s.name for s in SITES if s.reached not in BLOCK_PLACES)
BLOCK_SITES = tuple(s.name for s in SITES if s.reached in BLOCK_PLACES)
WRITABLE = tuple(s.name for s in SITES if s.writable)
EXPLICIT_ONLY = tuple(s.name for s in SITES if s.explicit_only)
MODEL_SITES = tuple(s.name for s in MODEL_SITE_SPECS)


class Site(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x
