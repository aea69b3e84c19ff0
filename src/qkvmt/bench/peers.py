"""The systems qkvmt is benchmarked against, built with our model's dimensions.

Every system maps (src, tgt_in) id batches to logits (B, T, V) (ours_align also to its
alignment loss), so one training loop times them all: ours, ours with a supervised head, the
same Transformer assembled from `torch.nn.Transformer`, and Hugging Face's MarianMTModel
(transformers is the optional `[bench]` extra; without it `marian` returns None and the
benchmark reports the row as missing).
"""

import math

import torch
from torch import Tensor, nn

from qkvmt.alignment.supervision import AlignmentSupervision, alignment_loss, forward_with_head
from qkvmt.errors import UserError
from qkvmt.export.to_huggingface import marian_config
from qkvmt.model.config import ModelConfig
from qkvmt.model.kernels import attention_kernel
from qkvmt.model.loss import output_loss
from qkvmt.model.transformer import Embedding, Transformer

NO_HF = "transformers is not installed: pip install -e '.[bench]'"  # what stands in a missing Marian's figures


class Ours(nn.Module):
    """Our Transformer under the SDPA kernel training uses: forward gives the logits (decoding
    and the peers' loss take them); `loss` is the training loss as training computes it, the
    output layer applied chunk by chunk (qkvmt.model.loss.output_loss). sdpa_backend: as
    training's module.sdpa_backend."""

    def __init__(self, cfg: ModelConfig, sdpa_backend: str | None = "auto"):
        super().__init__()
        self.model = Transformer(cfg)
        self.sdpa_backend = sdpa_backend

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        with attention_kernel(self.sdpa_backend, src.device):
            return self.model(src, tgt)[0]

    def loss(self, src: Tensor, tgt: Tensor, tgt_out: Tensor, label_smoothing: float) -> Tensor:
        with attention_kernel(self.sdpa_backend, src.device):
            hidden, _ = self.model(src, tgt, project=False)
        return output_loss(hidden, self.model.output.weight, tgt_out, self.model.cfg.pad_id, label_smoothing)


class OursAligned(Ours):
    """Ours with an alignment-supervised head, as training runs it (qkvmt.alignment.supervision):
    returns the logits and λ × the alignment loss. The labels are diagonal: what they hold does
    not change the work, so the benchmark needs no aligner."""

    def __init__(self, cfg: ModelConfig, supervision: AlignmentSupervision, sdpa_backend: str | None = "auto"):
        super().__init__(cfg, sdpa_backend)
        self.supervision = supervision.validated(cfg.decoder_layers, cfg.n_heads)

    def loss(self, src: Tensor, tgt: Tensor, tgt_out: Tensor, label_smoothing: float) -> Tensor:
        with attention_kernel(self.sdpa_backend, src.device):
            hidden, head = forward_with_head(self.model, src, tgt, self.supervision, project=False)  # head (B, T, S)
        b, t, s = head.shape
        diagonal = torch.arange(t, device=src.device) * s // t  # (T,) source position of each row
        labels = nn.functional.one_hot(diagonal, s).bool().expand(b, t, s)
        translation = output_loss(hidden, self.model.output.weight, tgt_out, self.model.cfg.pad_id, label_smoothing)
        return translation + self.supervision.weight * alignment_loss(head, labels)


class TorchTransformer(nn.Module):
    """nn.Transformer with our embeddings (tied, ×√d, sinusoidal positions) and output layer."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        nn.init.normal_(tokens.weight, 0.0, cfg.d_model**-0.5)
        self.embed = Embedding(cfg, tokens)
        self.transformer = nn.Transformer(
            d_model=cfg.d_model,
            nhead=cfg.n_heads,
            num_encoder_layers=cfg.encoder_layers,
            num_decoder_layers=cfg.decoder_layers,
            dim_feedforward=cfg.ffn_dim,
            dropout=cfg.dropout,
            batch_first=True,
            norm_first=cfg.norm_first,
        )
        self.output = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.output.weight = tokens.weight

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        src_pad = src == self.cfg.pad_id  # nn.Transformer's masks: True = ignore
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device, dtype=torch.bool)
        h = self.transformer(
            self.embed(src),
            self.embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return self.output(h)


class Marian(nn.Module):
    """Hugging Face MarianMTModel, randomly initialised, returning logits like the others."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        pad = self.model.config.pad_token_id
        return self.model(input_ids=src, attention_mask=src != pad, decoder_input_ids=tgt).logits


def marian(cfg: ModelConfig):
    """MarianMTModel of the same shape as ours, as the Hugging Face export builds it
    (qkvmt.export.to_huggingface.marian_config); None when transformers is not installed."""
    try:
        config = marian_config(cfg)
    except UserError:
        return None
    from transformers import MarianMTModel

    return Marian(MarianMTModel(config))


def parameter_count(model: nn.Module) -> int:
    """Trainable parameters (Marian's sinusoidal positions are a frozen parameter; ours a buffer)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_same_size(models: dict[str, nn.Module]) -> dict[str, int]:
    """Parameter counts; a peer more than 1% off ours would not be the same model
    (nn.Transformer adds a final layer norm to each stack even post-LN: 4·d parameters)."""
    counts = {name: parameter_count(m) for name, m in models.items()}
    ours = counts["ours"]
    for name, n in counts.items():
        if not math.isclose(n, ours, rel_tol=0.01):
            raise RuntimeError(f"{name} has {n} parameters, ours {ours}: the peers are not the same model")
    return counts
