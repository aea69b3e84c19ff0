"""Where each of our layers sits in a Hugging Face Marian or M2M100 folder: one table, which the import
(qkvmt.hf.weights) reads from and the export (qkvmt.export.to_huggingface) writes to.

Both name their modules alike (BART's layout): per layer self_attn, encoder_attn (the cross-attention),
fc1, fc2 and a LayerNorm after (Marian) or before (M2M100) each sub-layer; a pre-LN stack ends with a
LayerNorm of its own. Each entry is (ours, theirs, kind), the kind saying how the weights go across:

    attention   their q_proj, k_proj, v_proj are the rows of our w_qkv, in that order; out_proj is w_o
    reads       a linear layer that reads the residual stream (fc1)
    writes      a linear layer that writes it (fc2)
    norm        a LayerNorm of the residual stream

An export that renames the residual stream's coordinates (Marian's position table) needs to know which.
The embeddings and the output layer, with their ties, are each side's own (qkvmt.hf.weights.embeddings).
"""

from qkvmt.model.config import ModelConfig

ATTENTION, READS, WRITES, NORM = "attention", "reads", "writes", "norm"
SHARED = "model.shared.weight"
ENCODER_EMBED, DECODER_EMBED = "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"
OUTPUT, OUTPUT_BIAS = "lm_head.weight", "final_logits_bias"
# Tables transformers rebuilds from the config when it loads (Marian may have saved them): never weights.
REBUILT = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def feed_forward(ours: str, theirs: str) -> list[tuple[str, str, str]]:
    return [
        (f"{ours}.ffn.fc1", f"{theirs}.fc1", READS),
        (f"{ours}.ffn.fc2", f"{theirs}.fc2", WRITES),
        (f"{ours}.ffn_block.norm", f"{theirs}.final_layer_norm", NORM),
    ]


def layer_names(cfg: ModelConfig) -> list[tuple[str, str, str]]:
    """(ours, theirs, kind) of every block of a model of `cfg` but the embeddings and the output layer, in
    the order of the layers."""
    names = []
    for i in range(cfg.encoder_layers):
        ours, theirs = f"encoder_layers.{i}", f"model.encoder.layers.{i}"
        names += [
            (f"{ours}.self_attn", f"{theirs}.self_attn", ATTENTION),
            (f"{ours}.attn_block.norm", f"{theirs}.self_attn_layer_norm", NORM),
            *feed_forward(ours, theirs),
        ]
    for i in range(cfg.decoder_layers):
        ours, theirs = f"decoder_layers.{i}", f"model.decoder.layers.{i}"
        names += [
            (f"{ours}.self_attn", f"{theirs}.self_attn", ATTENTION),
            (f"{ours}.self_block.norm", f"{theirs}.self_attn_layer_norm", NORM),
            (f"{ours}.cross_attn", f"{theirs}.encoder_attn", ATTENTION),
            (f"{ours}.cross_block.norm", f"{theirs}.encoder_attn_layer_norm", NORM),
            *feed_forward(ours, theirs),
        ]
    if cfg.norm_first:  # pre-LN: each stack ends with a LayerNorm
        names += [
            ("encoder_norm", "model.encoder.layer_norm", NORM),
            ("decoder_norm", "model.decoder.layer_norm", NORM),
        ]
    return names


def projections(theirs: str) -> list[str]:
    """Their names of the rows of our w_qkv, in order."""
    return [f"{theirs}.{p}_proj" for p in "qkv"]
