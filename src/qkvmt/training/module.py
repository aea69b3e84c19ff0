"""The LightningModule: label-smoothed cross-entropy, Adam with a warmed-up lr schedule, and
validation/test BLEU computed with the same decoding code as scripts/evaluate.py."""

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import asdict

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Timer
from tokenizers import Tokenizer

from qkvmt.alignment.supervision import AlignmentSupervision, alignment_loss, forward_with_head
from qkvmt.decoding.lines import translate_lines
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.kernels import attention_kernel
from qkvmt.model.loss import CHUNK_ROWS, output_loss
from qkvmt.model.transformer import Transformer
from qkvmt.text.metrics import score
from qkvmt.training.compiled import compiled
from qkvmt.training.lr_schedule import lr_factor
from qkvmt.training.matmul_rows import LINEAR_ROW_MULTIPLE, few_matmul_shapes
from qkvmt.training.progress import logged


class TranslationModule(L.LightningModule):
    """optimizer: a partial taking the parameters (e.g. torch.optim.Adam with its lr, betas, eps).

    sdpa_backend: the SDPA kernel for training (see qkvmt.model.kernels.attention_kernel); decoding
    lets torch choose, exactly as evaluation does.
    loss_chunk_rows: target tokens whose logits exist at once (qkvmt.model.loss.output_loss).
    compile: run the training, validation and test loss through torch.compile (dynamic shapes, one
    graph for every batch shape): fused kernels, fewer launches, the whole logits at once.
    Decoding stays eager.
    compile_mode: torch.compile's mode (qkvmt.training.compiled); reduce-overhead replays a CUDA
    graph per batch shape, on a GPU only.
    linear_row_multiple: under CPU bf16 autocast, every linear layer of a training, validation or
    test step computes on its rows padded to a multiple of this, so that oneDNN meets few shapes
    (qkvmt.training.matmul_rows); 0: off. Decoding runs in float32 and needs none.
    tokenizer_files: a model imported from a Hugging Face folder (qkvmt.hf): its tokenizer files, name ->
    base64, which every checkpoint keeps in place of a tokenizer JSON, so it needs no folder to load.
    """

    def __init__(
        self,
        model_config: ModelConfig,
        tokenizer: Tokenizer,
        optimizer: Callable,
        warmup_steps: int = 4000,
        lr_schedule: str = "inverse_sqrt",
        label_smoothing: float = 0.1,
        val_decode: DecodeConfig | None = None,
        test_decode: DecodeConfig | None = None,
        sdpa_backend: str | None = "auto",
        linear_row_multiple: int = LINEAR_ROW_MULTIPLE,
        loss_chunk_rows: int = CHUNK_ROWS,
        src_lang: str = "",
        tgt_lang: str = "",
        alignment: AlignmentSupervision | None = None,
        compile: bool = False,
        compile_mode: str = "default",
        tokenizer_files: dict[str, str] | None = None,
    ):
        super().__init__()
        self.model_config = model_config
        self.model = Transformer(model_config)
        self.alignment = (alignment or AlignmentSupervision()).validated(
            model_config.decoder_layers, model_config.n_heads
        )
        self.tokenizer, self.tokenizer_files = tokenizer, tokenizer_files
        self.optimizer_fn = optimizer
        self.warmup_steps, self.label_smoothing = warmup_steps, label_smoothing
        self.lr_factor = lr_factor(lr_schedule, warmup_steps, self.budget_spent)  # checked now, not after setup
        self.val_decode = val_decode or DecodeConfig(beam_size=1)
        self.test_decode = test_decode or DecodeConfig()
        self.sdpa_backend = sdpa_backend
        self.linear_row_multiple = linear_row_multiple
        self.loss_chunk_rows = loss_chunk_rows
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        # when the tokens of train/tgt_tok_s began to count, and how many since: set by on_train_start
        self._rate_clock, self._rate_tokens = 0.0, 0
        self.test_scores: dict = {}
        self._loss = compiled(self.plain_loss, compile_mode) if compile else self.plain_loss

    def step_kernels(self) -> contextlib.ExitStack:
        """What a training, validation or test step's forward runs under: the chosen attention
        kernel, and under CPU bf16 autocast (Lightning's bf16-mixed) padded linear rows."""
        stack = contextlib.ExitStack()
        stack.enter_context(attention_kernel(self.sdpa_backend, self.device))
        stack.enter_context(few_matmul_shapes(self.linear_row_multiple))
        return stack

    def loss(self, batch: dict) -> torch.Tensor:
        return self._loss(batch["src"], batch["tgt_in"], batch["tgt_out"])

    def plain_loss(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.model(src, tgt_in, project=False)  # (B, T, D)
        return self.output_loss(hidden, tgt_out)

    def output_loss(self, hidden: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
        return output_loss(
            hidden,
            self.model.output.weight,
            tgt_out,
            self.model_config.pad_id,
            self.label_smoothing,
            chunk_rows=self.loss_chunk_rows,
        )

    def supervised_loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """(translation loss, alignment loss) of a batch with `align` labels."""
        hidden, head = forward_with_head(self.model, batch["src"], batch["tgt_in"], self.alignment, project=False)
        ce = self.output_loss(hidden, batch["tgt_out"])
        return ce, alignment_loss(head, batch["align"])

    def on_train_start(self) -> None:  # and after each validation: tokens/s measures training steps only
        self._rate_clock, self._rate_tokens = time.perf_counter(), 0

    on_validation_end = on_train_start

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        with self.step_kernels():
            if self.alignment.on:
                translation, align = self.supervised_loss(batch)
                loss = translation + self.alignment.weight * align
                self.log("train/align_loss", align, batch_size=batch["ntokens"])
            else:
                loss = translation = self.loss(batch)
        # Device values stay on the device: Lightning reads them back only at the steps it logs.
        self.log("train/loss", translation, batch_size=batch["ntokens"])  # as val/loss: no λ term
        self._rate_tokens += batch["ntokens"]
        return loss

    def on_before_optimizer_step(self, optimizer) -> None:
        # Once an optimizer step, however many batches it accumulates. `self.log` copies a Python
        # number to the device, which makes a GPU's host wait for the queued work: only at the
        # steps whose values the loggers read back anyway.
        if logged(self.trainer, self.global_step + 1):
            self.log_rates(optimizer)

    def log_rates(self, optimizer) -> None:
        """The lr, and target tokens a second over the steps since the last logged one."""
        now = time.perf_counter()  # wall time of whole steps; no device sync needed
        self.log("train/tgt_tok_s", self._rate_tokens / (now - self._rate_clock), batch_size=1)
        self._rate_clock, self._rate_tokens = now, 0
        self.log("train/lr", optimizer.param_groups[0]["lr"], batch_size=1)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        with self.step_kernels():
            self.log("val/loss", self.loss(batch), sync_dist=True, batch_size=batch["ntokens"])

    def test_step(self, batch: dict, batch_idx: int) -> None:
        with self.step_kernels():
            self.log("test/loss", self.loss(batch), sync_dist=True, batch_size=batch["ntokens"])

    def translate_split(self, stage: str, cfg: DecodeConfig) -> dict:
        """Scores of the whole split, translated by translate_lines exactly as evaluate.py does.

        Each rank translates every world_size-th sentence; the pieces are gathered so every rank
        holds the same scores. Decoding runs in float32 whatever the training precision, as in
        evaluation, so a logged score is reproducible from the checkpoint.
        """
        sources, refs = self.trainer.datamodule.read(stage)
        rank, world = self.trainer.global_rank, self.trainer.world_size
        mine = list(range(rank, len(sources), world))
        with torch.autocast(self.device.type, enabled=False):
            hyps = translate_lines(self.model, self.tokenizer, [sources[i] for i in mine], cfg)
        pairs = list(zip(mine, hyps))
        if dist.is_available() and dist.is_initialized():
            gathered = [None] * world
            dist.all_gather_object(gathered, pairs)
            pairs = [p for part in gathered for p in part]
        pairs.sort()
        return score([h for _, h in pairs], [refs[i] for i, _ in pairs])

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        s = self.translate_split("val", self.val_decode)
        # Every rank holds the same gathered scores; syncing them changes nothing.
        self.log_dict({"val/bleu": s["bleu"], "val/chrf": s["chrf"]}, prog_bar=True, sync_dist=True)

    def on_test_epoch_end(self) -> None:
        self.test_scores = self.translate_split("test", self.test_decode)
        self.log_dict({"test/bleu": self.test_scores["bleu"], "test/chrf": self.test_scores["chrf"]}, sync_dist=True)

    def configure_optimizers(self):
        optimizer_fn = self.optimizer_fn
        if self.trainer.gradient_clip_val and getattr(optimizer_fn, "keywords", {}).get("fused"):
            # Under mixed precision Lightning clips only gradients it unscales itself, and refuses
            # an optimizer that unscales inside its own step, as a fused one does.
            optimizer_fn = functools.partial(optimizer_fn, fused=False)
        optimizer = optimizer_fn(self.parameters())
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def budget_spent(self, done: int) -> float:
        """Fraction of the training budget spent after `done` steps: trainer.max_steps or
        trainer.max_time, whichever is nearer its end. Rank 0's clock decides, so every rank
        steps with the same lr."""
        trainer = self.trainer
        spent = done / trainer.max_steps if trainer.max_steps > 0 else 0.0
        timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
        if timer is not None:
            elapsed, remaining = timer.time_elapsed("train"), timer.time_remaining("train")
            if remaining is not None and elapsed + remaining > 0:
                spent = max(spent, trainer.strategy.broadcast(elapsed / (elapsed + remaining)))
        return spent

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Plain data only (dicts, strings, numbers): the file alone rebuilds the model and
        # tokenizer, and loads with torch.load(weights_only=True).
        checkpoint["qkvmt"] = CheckpointMeta(
            model_config=self.model_config.to_dict(),
            tokenizer=self.tokenizer.to_str() if self.tokenizer_files is None else "",
            src_lang=self.src_lang,
            tgt_lang=self.tgt_lang,
            decode=asdict(self.test_decode),  # the run's test settings; align.py decodes with them
            alignment=self.alignment.to_dict() if self.alignment.on else None,  # align.py's default policy reads it
            tokenizer_files=self.tokenizer_files,
        ).to_dict()
