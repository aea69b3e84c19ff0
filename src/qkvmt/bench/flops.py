"""Model FLOPs utilization: the FLOPs the model needs for a batch, over the time it took, over
the device's peak.

Training FLOPs of one batch, counting a multiply-add as 2 FLOPs and the backward pass as twice
the forward (so training = 3 × forward), for d = d_model, f = ffn_dim, V = vocabulary,
L_e / L_d encoder / decoder layers, n_s / n_t real (non-pad) source / target tokens and S / T
the padded source / target lengths the attention spans:

    forward = n_s · L_e · (2·4d²  + 2·2df + 2·2·S·d)          encoder: Q K V O, FFN, QKᵀ and AV
            + n_s · L_d · 2·2d²                                cross-attention K, V of the memory
            + n_t · L_d · (2·6d² + 2·2df + 2·2·T·d + 2·2·S·d)  decoder: self Q K V O, cross Q O,
                                                               FFN, self and cross QKᵀ and AV
            + n_t · 2dV                                        output layer
    training = 3 · forward

Embedding lookups, layer norms, softmax and the loss are left out (under 1% here); padding is
not counted as useful work, so MFU is a lower bound of what the hardware did.
"""

import torch

from qkvmt.model.config import ModelConfig

# Dense bf16 tensor-core peaks, TFLOP/s, from NVIDIA's data sheets (without sparsity).
BF16_PEAK_TFLOPS = {
    "H200": 989.4,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.4,  # SXM5
    "A100": 312.0,
}


def training_flops(cfg: ModelConfig, src: torch.Tensor, tgt: torch.Tensor) -> float:
    """FLOPs of one training step on the (B, S) source and (B, T) target id batches."""
    d, f, v = cfg.d_model, cfg.ffn_dim, cfg.vocab_size
    s_len, t_len = src.size(1), tgt.size(1)
    n_s = int((src != cfg.pad_id).sum())
    n_t = int((tgt != cfg.pad_id).sum())
    encoder = n_s * cfg.encoder_layers * (8 * d * d + 4 * d * f + 4 * s_len * d)
    memory_kv = n_s * cfg.decoder_layers * 4 * d * d
    decoder = n_t * cfg.decoder_layers * (12 * d * d + 4 * d * f + 4 * t_len * d + 4 * s_len * d)
    output = n_t * 2 * d * v
    return 3.0 * (encoder + memory_kv + decoder + output)


def peak_tflops(device: torch.device, override: float | None = None) -> tuple[float | None, str]:
    """The bf16 peak used for MFU and where it came from; None when unknown (e.g. a CPU)."""
    if override is not None:
        return float(override), "given by peak_tflops"
    if device.type != "cuda":
        return None, "no known peak for this device: set peak_tflops"
    name = torch.cuda.get_device_name(device)
    for key, tflops in BF16_PEAK_TFLOPS.items():  # the more specific names come first
        if key in name:
            return tflops, f"{name}: dense bf16 data-sheet peak"
    return None, f"{name}: no known peak; set peak_tflops"
