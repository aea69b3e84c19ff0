"""The training step as a GPU runs it, checked on a CPU.

A GPU step is fast only if the host never waits for it: an `.item()`, a boolean index or a
`nonzero` makes the host read a result back and leaves the GPU idle until the next launch. On
the meta device tensors have shapes but no values, so every such operation fails there: a step
that runs on meta reads nothing back. torch.compile fuses the step's small kernels only if it
traces the step whole: a graph break splits it and adds a round trip through Python.
"""

import pytest
import torch
from hydra.utils import instantiate
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from qkvmt.model.config import ModelConfig
from qkvmt.model.loss import translation_loss
from qkvmt.training.module import TranslationModule
from tests.conftest import CONF, compose_train

V, PAD = 60, 0


def make_module(**module_kwargs) -> TranslationModule:
    cfg = ModelConfig(vocab_size=V, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=3, ffn_dim=64,
                      dropout=0.0, max_positions=32, pad_id=PAD)
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


def test_module_compile_routes_the_loss_through_torch_compile(monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(kw) or fn)
    assert make_module(compile=True) and compiled == [{"dynamic": True}]
    assert make_module(compile=False) and len(compiled) == 1


@pytest.mark.parametrize("experiment", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_recipe_updates_its_parameters_with_one_fused_adam_kernel(experiment):
    """A GPU step launches one optimizer kernel, not several per tensor group; the fused step is
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
