"""A compile mode that could not take effect is refused before a run starts; the others pass."""

from collections import Counter

import pytest
from hydra.utils import instantiate
from torch._inductor import config as inductor_config
from torch._inductor import list_mode_options

import qkvmt.training.compiled
from qkvmt.errors import UserError
from qkvmt.training.compiled import MODES, check_compile, uses_cuda_graphs
from tests.conftest import MULTI30K, compose_train, requires_multi30k


def test_the_modes_are_torchs_own_and_the_graph_modes_are_those_that_set_cudagraphs():
    assert set(MODES) == set(list_mode_options()) >= {"default", "reduce-overhead", "max-autotune"}
    assert uses_cuda_graphs("reduce-overhead") and uses_cuda_graphs("max-autotune")
    assert not uses_cuda_graphs("default") and not uses_cuda_graphs("max-autotune-no-cudagraphs")


@pytest.mark.parametrize(
    "compile, mode, device, accumulate, message",
    [
        (True, "fast", "cuda", 1, r"^module\.compile_mode='fast': use one of default, .*reduce-overhead"),
        (False, "max-autotune-no-cudagraphs", "cuda", 1, r"nothing is compiled; add module\.compile=true$"),
        (True, "reduce-overhead", "cpu", 1, r"replays CUDA graphs, and this run has no CUDA device \(cpu\)"),
        (True, "max-autotune", "mps", 1, r"replays CUDA graphs, and this run has no CUDA device \(mps\)"),
        (True, "reduce-overhead", "cuda", 2, r"with trainer\.accumulate_grad_batches=2: a CUDA graph's next replay"),
    ],
)
def test_a_mode_that_cannot_take_effect_is_refused_by_name(compile, mode, device, accumulate, message):
    with pytest.raises(UserError, match=message):
        check_compile(compile, mode, device, "module.", accumulate)


@pytest.mark.parametrize(
    "compile, mode, device",
    [
        (False, "default", "cpu"),
        (True, "default", "cpu"),
        (True, "max-autotune-no-cudagraphs", "cpu"),
        (True, "reduce-overhead", "cuda"),
    ],
)
def test_a_mode_that_takes_effect_passes(compile, mode, device):
    check_compile(compile, mode, device, "module.", accumulate=1)


def test_graphs_are_refused_with_a_torch_that_would_skip_one_it_cannot_capture(monkeypatch):
    monkeypatch.setattr(qkvmt.training.compiled, "GRAPHS_OR_ERROR", False)
    with pytest.raises(UserError, match=r"^compile_mode=reduce-overhead needs torch 2\.9 or later \(this is "):
        check_compile(True, "reduce-overhead", "cuda", "")
    check_compile(True, "max-autotune-no-cudagraphs", "cuda", "")  # no graphs, nothing to skip


@requires_multi30k
@pytest.mark.parametrize("max_tokens", [8192, 25000])  # the GPU recipes' batches; the GPU benchmark's
def test_with_lengths_in_multiples_of_8_multi30k_batches_take_fewer_shapes_than_torch_warns_at(tmp_path, max_tokens):
    """Under CUDA graphs each batch shape is recorded once and replayed; torch warns past a limit
    of recorded shapes. Token-budget batches with lengths in multiples of 8 stay under it, epoch
    after epoch (ties are shuffled differently, so a batch's longest sentence may change)."""
    limit = inductor_config.triton.cudagraph_dynamic_shape_warn_limit
    cfg = compose_train(
        "experiment=multi30k_en_de_gpu",
        f"data.root={MULTI30K}",
        f"data.cache_dir={tmp_path / 'cache'}",
        f"paths.output_dir={tmp_path}",
        "data.length_multiple=8",
        f"data.max_tokens={max_tokens}",
    )
    dm = instantiate(cfg.data)
    dm.load_tokenizer(tmp_path / "tokenizer.json")
    loader = dm.train_dataloader()
    shapes = Counter()
    for epoch in range(5):
        loader.batch_sampler.position = lambda epoch=epoch: (epoch, 0)
        shapes.update((tuple(b["src"].shape), tuple(b["tgt_in"].shape)) for b in loader)
    evaluated = {(tuple(b["src"].shape), tuple(b["tgt_in"].shape)) for b in dm.val_dataloader()}
    assert sum(shapes.values()) > 5 * 20 and len(shapes) <= limit, shapes
    assert len(evaluated) <= limit, evaluated
