"""Named points inside the forward pass where a trace reads a tensor and an edit replaces it.

A `Site` is an identity module: with no hook attached it returns its input untouched, and a
forward hook on it (qkvmt.analysis.trace) sees the tensor, or returns another one in its place.
The sites of an attention module are on its explicit path only (the one that returns weights):
the fast kernel, which training and search run, never calls them.
"""

from torch import Tensor, nn

ATTENTION_SITES = ("q", "k", "v", "scores", "weights")  # per head, positions applied; scores before the softmax


class Site(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x
