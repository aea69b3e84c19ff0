"""The LightningModule: label-smoothed cross-entropy, Adam with inverse-square-root warmup, and
validation/test BLEU computed with the same decoding code as scripts/evaluate.py."""

import contextlib
import time
from collections.abc import Callable

import lightning as L
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch.nn.attention import SDPBackend, sdpa_kernel

from qkvmt.config import ModelConfig
from qkvmt.decoding import DecodeConfig, generate
from qkvmt.metrics import score
from qkvmt.model import Transformer
from qkvmt.tokenizer import decode


def inverse_sqrt(warmup_steps: int) -> Callable[[int], float]:
    """lr factor: linear warmup to 1 at `warmup_steps`, then warmup^0.5 * step^-0.5 (Vaswani et al.)."""

    def factor(step: int) -> float:
        step = step + 1
        return min(step / warmup_steps, (warmup_steps / step) ** 0.5)

    return factor


class TranslationModule(L.LightningModule):
    """optimizer: a partial taking the parameters (e.g. torch.optim.Adam with its lr, betas, eps).

    sdpa_backend: pin the SDPA kernel ("math", "flash", "efficient", "cudnn"); None lets torch
    choose; "auto" picks "math" on CPU, where it trains over twice as fast as the fused CPU kernel
    on sentence-length sequences (its backward is slow for short rows), and leaves GPUs to torch.
    """

    def __init__(
        self,
        model_config: ModelConfig,
        tokenizer: Tokenizer,
        optimizer: Callable,
        warmup_steps: int = 4000,
        label_smoothing: float = 0.1,
        val_decode: DecodeConfig | None = None,
        test_decode: DecodeConfig | None = None,
        sdpa_backend: str | None = "auto",
        src_lang: str = "",
        tgt_lang: str = "",
    ):
        super().__init__()
        self.model_config = model_config
        self.model = Transformer(model_config)
        self.tokenizer = tokenizer
        self.optimizer_fn = optimizer
        self.warmup_steps, self.label_smoothing = warmup_steps, label_smoothing
        self.val_decode = val_decode or DecodeConfig(beam_size=1)
        self.test_decode = test_decode or DecodeConfig()
        self.sdpa_backend = sdpa_backend
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self._outputs: list[tuple[int, str]] = []
        self._last_step_time: float | None = None
        self.test_scores: dict = {}

    def attention_kernel(self):
        backend = self.sdpa_backend
        if backend == "auto":
            backend = "math" if self.device.type == "cpu" else None
        if backend is None:
            return contextlib.nullcontext()
        return sdpa_kernel(getattr(SDPBackend, backend.upper()))

    def loss(self, batch: dict) -> torch.Tensor:
        logits, _ = self.model(batch["src"], batch["tgt_in"])  # (B, T, V)
        return F.cross_entropy(
            logits.flatten(0, 1).float(),
            batch["tgt_out"].flatten(),
            ignore_index=self.model_config.pad_id,
            label_smoothing=self.label_smoothing,
        )

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        with self.attention_kernel():
            loss = self.loss(batch)
        now = time.perf_counter()
        if self._last_step_time is not None:  # wall time of a whole step; no device sync needed
            self.log("train/tgt_tok_s", batch["ntokens"] / (now - self._last_step_time), batch_size=batch["ntokens"])
        self._last_step_time = now
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["ntokens"])
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], prog_bar=True, batch_size=batch["ntokens"])
        return loss

    def translate(self, src: torch.Tensor, cfg: DecodeConfig) -> list[str]:
        """Detokenized translations of a padded batch of source ids: the code evaluate.py runs too."""
        with self.attention_kernel():
            hyps = generate(self.model, src, cfg)
        return decode(self.tokenizer, [h.tokens for h in hyps])

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        with self.attention_kernel():
            self.log("val/loss", self.loss(batch), sync_dist=True, batch_size=batch["ntokens"])
        self._outputs += zip(batch["index"].tolist(), self.translate(batch["src"], self.val_decode))

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._outputs += zip(batch["index"].tolist(), self.translate(batch["src"], self.test_decode))

    def on_validation_epoch_start(self) -> None:
        self._outputs = []

    on_test_epoch_start = on_validation_epoch_start

    def _score(self, stage: str) -> dict:
        """Corpus scores over every rank's translations, each sentence against its reference."""
        outputs = self._outputs
        if dist.is_available() and dist.is_initialized():
            gathered = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, outputs)
            outputs = [pair for part in gathered for pair in part]
        outputs = sorted(dict(outputs).items())  # DDP may repeat a sentence; keep one copy
        refs = self.trainer.datamodule.references(stage)
        return score([h for _, h in outputs], [refs[i] for i, _ in outputs])

    def on_validation_epoch_end(self) -> None:
        s = self._score("val")
        # Every rank holds the same gathered scores, so no further sync is needed.
        self.log_dict({"val/bleu": s["bleu"], "val/chrf": s["chrf"]}, prog_bar=True)

    def on_test_epoch_end(self) -> None:
        self.test_scores = self._score("test")
        self.log_dict({"test/bleu": self.test_scores["bleu"], "test/chrf": self.test_scores["chrf"]})

    def configure_optimizers(self):
        optimizer = self.optimizer_fn(self.parameters())
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, inverse_sqrt(self.warmup_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Plain data only (dicts, strings, numbers): the file alone rebuilds the model and
        # tokenizer, and loads with torch.load(weights_only=True).
        checkpoint["qkvmt"] = {
            "model_config": self.model_config.to_dict(),
            "tokenizer": self.tokenizer.to_str(),
            "src_lang": self.src_lang,
            "tgt_lang": self.tgt_lang,
        }
