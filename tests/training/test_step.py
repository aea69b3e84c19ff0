"""The training step as a GPU runs it, checked on a CPU.

A GPU step is fast only if the host never waits for it: an `.item()`, a boolean index or a
`nonzero` makes the host read a result back and leaves the GPU idle until the next launch. On
the meta device tensors have shapes but no values, so every such operation fails there: a step
that runs on meta reads nothing back. torch.compile fuses the step's small kernels only if it
traces the step whole: a graph break splits it and adds a round trip through Python.
"""

import os
import sys

import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch import Callback
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from torch.utils._python_dispatch import TorchDispatchMode

from qkvmt.model.config import ModelConfig
from qkvmt.model.loss import translation_loss
from qkvmt.training.module import TranslationModule
from tests.conftest import CONF, compose_train, tiny_overrides

V, PAD = 60, 0
RECIPES = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def make_module(**module_kwargs) -> TranslationModule:
    cfg = ModelConfig(
        vocab_size=V,
        d_model=32,
        n_heads=4,
        encoder_layers=2,
        decoder_layers=3,
        ffn_dim=64,
        dropout=0.0,
        max_positions=32,
        pad_id=PAD,
    )
    tokenizer = Tokenizer(WordLevel({"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}, unk_token="<unk>"))
    torch.manual_seed(0)
    module = TranslationModule(cfg, tokenizer, optimizer=lambda p: torch.optim.Adam(p, lr=1e-3), **module_kwargs)
    with torch.no_grad():  # a trained model's: biases not zero, layer norms not the identity
        for name, p in module.model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    return module


def make_batch(device="cpu") -> dict:
    torch.manual_seed(1)
    src, tgt_in, tgt_out = torch.randint(4, V, (3, 9)), torch.randint(4, V, (3, 7)), torch.randint(4, V, (3, 7))
    src[0, 5:] = PAD
    tgt_in[1, 4:], tgt_out[1, 4:] = PAD, PAD
    return {"src": src.to(device), "tgt_in": tgt_in.to(device), "tgt_out": tgt_out.to(device), "ntokens": 18}


def test_a_training_step_never_reads_a_value_back_from_the_device():
    with torch.device("meta"):
        module = make_module()
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3, foreach=True)  # fused has no meta kernel
    batch = make_batch("meta")
    with module.step_kernels():
        loss = module.loss(batch)
    loss.backward()
    optimizer.step()
    assert loss.device.type == "meta" and all(p.grad is not None for p in module.parameters())


def test_the_meta_device_does_refuse_what_would_wait_for_a_gpu():
    """The check above means something only if meta refuses a host read: here, the boolean
    index the loss used to take its real rows with."""
    hidden = torch.zeros(3, 7, 32, device="meta")
    with pytest.raises((RuntimeError, NotImplementedError)):
        hidden[torch.ones(3, 7, dtype=torch.bool, device="meta")]


def test_the_training_loss_compiles_whole_and_equals_the_eager_loss():
    module = make_module()
    batch = make_batch()
    args = (batch["src"], batch["tgt_in"], batch["tgt_out"])
    explained = torch._dynamo.explain(module.plain_loss)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1

    results = []
    for fn in (module.plain_loss, torch.compile(module.plain_loss, backend="aot_eager", dynamic=True)):
        module.zero_grad(set_to_none=True)
        loss = fn(*args)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in module.named_parameters()}))
    (eager, eager_grads), (compiled, compiled_grads) = results
    reference = translation_loss(module.model(*args[:2])[0], args[2], PAD, module.label_smoothing)
    torch.testing.assert_close(eager, reference.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_module_compile_routes_the_loss_through_torch_compile_in_its_mode(monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(kw) or fn)
    make_module(compile=True), make_module(compile=True, compile_mode="max-autotune-no-cudagraphs")
    assert [(kw["dynamic"], kw["mode"]) for kw in compiled] == [(True, None), (True, "max-autotune-no-cudagraphs")]
    make_module(compile=True, compile_mode="reduce-overhead")
    assert compiled[-1]["options"] == {"triton.cudagraphs": True, "triton.cudagraph_or_error": True}
    assert make_module(compile=False) and len(compiled) == 3


def test_every_recipe_that_compiles_gives_its_batches_lengths_in_multiples_of_8():
    """A compiled step specializes on a length's divisibility by 8 and compiles again when it
    changes, until dynamo's recompile limit leaves the step eager: a recipe that trains compiled
    pads every batch's lengths to a multiple of 8, so one graph serves all of them."""
    recipes = {name: compose_train(f"experiment={name}") for name in RECIPES}
    compiled = {name: cfg.data.length_multiple for name, cfg in recipes.items() if cfg.module.compile}
    assert compiled, "no recipe trains compiled: the Transformer-base GPU recipes should"
    assert all(m % 8 == 0 for m in compiled.values()), compiled


@pytest.mark.parametrize("experiment", RECIPES)
def test_every_recipe_updates_its_parameters_with_fused_adam(experiment):
    """The whole Adam update runs fused, not one kernel per operation and tensor group, and is
    the same Adam as torch's default one, to float32 rounding, on a several-layer model."""
    cfg = compose_train(f"experiment={experiment}")
    module, reference = make_module(), make_module()
    for m in (module, reference):
        m.loss(make_batch()).backward()
    recipe = instantiate(cfg.module.optimizer)(module.parameters())
    default = instantiate(cfg.module.optimizer, fused=None)(reference.parameters())
    assert recipe.defaults["fused"] and not default.defaults["fused"]
    for _ in range(3):
        recipe.step(), default.step()
    for (name, p), q in zip(module.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p, q, msg=lambda m: f"{name}: {m}")


# What makes a GPU's host wait: a value read back (.item(), bool(), a shape that depends on the
# data) or Python data made into a tensor (torch.tensor: on a GPU, a copy that waits for the queue).
# A boolean index is one too, but the loss picks the real rows with one on a CPU only, by design:
# the model's step is checked on the meta device above, the loop around it here.
HOST_READS = {
    "_local_scalar_dense",
    "is_nonzero",
    "nonzero",
    "masked_select",
    "equal",
    "lift_fresh",
    "_unique2",
    "unique_consecutive",
    "unique_dim",
}


def in_data_loader() -> bool:
    """Whether a DataLoader is at work up the stack: a new iterator (each validation) draws its
    seed with the host's own generator, which waits for no device."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("torch", "utils", "data", "dataloader.py")):
            return True
        frame = frame.f_back
    return False


class HostReads(Callback):
    """Records, by training step, every op of the training loop that would make a GPU's host
    wait. A step's window runs from its on_train_batch_start to the next one, so it holds the
    loggers' and the progress bar's work after the step; validation is left out."""

    seen: list[tuple[int, str]] = []

    def __init__(self):
        watcher = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if watcher.step is not None and name in HOST_READS and not in_data_loader():
                    HostReads.seen.append((watcher.step, name))
                return func(*args, **(kwargs or {}))

        self.mode, self.step, self.watching = Mode(), None, False

    def on_train_start(self, trainer, pl_module):
        self.mode.__enter__()
        self.watching = True

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.step = trainer.global_step

    def on_validation_start(self, trainer, pl_module):
        self.step = None

    def on_train_end(self, trainer, pl_module):
        self.step = None
        if self.watching:  # once, also after a failed run: a mode left on would watch the whole session
            self.mode.__exit__(None, None, None)
            self.watching = False

    def on_exception(self, trainer, pl_module, exception):
        self.on_train_end(trainer, pl_module)


@pytest.mark.slow
@pytest.mark.parametrize("accumulate", [1, 2])
def test_the_training_loop_reads_the_device_only_at_the_steps_it_logs(corpus, tmp_path, accumulate):
    """The recipe's whole loop (Lightning, the progress bar, the NaN check, the loggers) leaves a
    GPU's queue alone between logging steps: nothing is read back, nothing copied up, also when
    a step accumulates several batches. Batches are made in a worker process, as a GPU run may,
    so their tensors are not the loop's."""
    from qkvmt.pipeline.train import train

    HostReads.seen.clear()
    every, steps = 5, 12
    overrides = tiny_overrides(corpus, tmp_path / "run", steps=steps, val_every=6 * accumulate)
    train(
        compose_train(
            *overrides,
            f"trainer.log_every_n_steps={every}",
            "trainer.enable_progress_bar=true",
            f"trainer.accumulate_grad_batches={accumulate}",
            "data.max_tokens=128",
            "data.num_workers=1",
            f"+callbacks.host_reads._target_={__name__}.HostReads",
        )
    )
    logged = {s for s in range(steps) if (s + 1) % every == 0}
    read = {step for step, _ in HostReads.seen}
    # step 0: Lightning's first record of train/loss; then only what the loggers read, and they do read
    assert read - {0} == logged, [r for r in HostReads.seen if r[0] not in logged | {0}]
