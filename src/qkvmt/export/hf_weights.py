"""Our weights under a Hugging Face Marian's or M2M100's names (qkvmt.hf.names, the table the import reads
by), for format=huggingface.

One thing differs for qkvmt's own post-LN models: Marian's position table puts all sines before all
cosines, ours interleaves them (columns 2i, 2i+1 = sin, cos of frequency i). Both tables hold the same
columns, so the export renames the model's d coordinates of the residual stream with that permutation (a
model with Marian's own table, `sinusoidal_layout=halves`, or M2M100's, `fairseq`, needs none):

    Marian column j  =  our column PERM[j],   PERM = [0, 2, 4, ..., 1, 3, 5, ...]

Every weight that reads the residual stream takes its input columns in that order, every weight and bias
that writes it (and each layer norm) its output rows. The network computes the same function, and
Marian's own position table, which it rebuilds when it loads, is then exactly ours. Attention's heads and
the feed-forward inner units are not renamed.
"""

import torch

from qkvmt.hf.families import written_as
from qkvmt.hf.names import (
    ATTENTION,
    DECODER_EMBED,
    ENCODER_EMBED,
    NORM,
    OUTPUT,
    OUTPUT_BIAS,
    READS,
    SHARED,
    WRITES,
    layer_names,
    projections,
)
from qkvmt.model.transformer import Transformer


def residual_permutation(d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """PERM: Marian's residual coordinate j is our coordinate PERM[j] (the identity for a table already
    theirs, `layout` halves or fairseq)."""
    if layout in ("halves", "fairseq"):
        return torch.arange(d_model)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def hf_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under Marian's or M2M100's names, the residual stream's coordinates permuted; no position
    table, which transformers builds from the config."""
    c = model.cfg
    p, d = residual_permutation(c.d_model, c.sinusoidal_layout), c.d_model
    ours = model.state_dict()
    sd: dict[str, torch.Tensor] = {}

    def reads(name: str, mine: str, rows: slice = slice(None)) -> None:  # input: the residual stream
        sd[f"{name}.weight"] = ours[f"{mine}.weight"][rows][:, p]
        sd[f"{name}.bias"] = ours[f"{mine}.bias"][rows]

    def writes(name: str, mine: str) -> None:  # output: the residual stream (a layer norm's too)
        sd[f"{name}.weight"], sd[f"{name}.bias"] = ours[f"{mine}.weight"][p], ours[f"{mine}.bias"][p]

    for mine, name, kind in layer_names(c):
        if kind == ATTENTION:
            for i, projection in enumerate(projections(name)):
                reads(projection, f"{mine}.w_qkv", slice(i * d, (i + 1) * d))
            writes(f"{name}.out_proj", f"{mine}.w_o")
        else:
            {READS: reads, WRITES: writes, NORM: writes}[kind](name, mine)
    src, tgt = model.src_embed.tokens.weight[:, p], model.tgt_embed.tokens.weight[:, p]
    sd[ENCODER_EMBED], sd[DECODER_EMBED] = src, tgt
    if c.tie_embeddings:  # one shared matrix; separate vocabularies have none
        sd[SHARED] = src
    sd[OUTPUT] = model.output.weight[:, p]
    if written_as(c).output_bias:  # final_logits_bias (Marian's; M2M100 has none)
        bias = model.output.bias
        sd[OUTPUT_BIAS] = torch.zeros(1, c.target_vocab_size) if bias is None else bias[None]
    return {k: v.detach().float().contiguous().clone() for k, v in sd.items()}
