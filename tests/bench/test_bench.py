"""Tests for qkvmt.bench and scripts/benchmark.py: the peers are the same model, the work is
equal, the FLOP formula is right, and benchmark.json carries every key."""

import importlib.util
import json
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from qkvmt.bench.corpus import PeakMemory, synthetic_pairs, tokenize_scaling
from qkvmt.bench.flops import peak_tflops, training_flops
from qkvmt.bench.peers import Ours, TorchTransformer, check_same_size, marian
from qkvmt.bench.profile import DIRECT, copy_origins, device_busy_ms, profile_training
from qkvmt.bench.timing import (
    TrainTimer,
    hf_fixed_length,
    ours_fixed_length,
    time_in_turns,
    time_training,
    timed_batches,
)
from qkvmt.data.batching import Collate
from qkvmt.host.process_memory import release_freed_host_memory
from qkvmt.model.config import ModelConfig
from qkvmt.text.tokenizer import encode, train_bpe
from tests.commandline import run_python, run_script, user_error
from tests.conftest import compose_train, write_corpus

HAS_HF = importlib.util.find_spec("transformers") is not None
HAS_CT2 = importlib.util.find_spec("ctranslate2") is not None
requires_hf = pytest.mark.skipif(not HAS_HF, reason="transformers not installed (pip install -e '.[bench]')")
CFG = ModelConfig(vocab_size=50, d_model=32, n_heads=4, encoder_layers=2, decoder_layers=2, ffn_dim=64, dropout=0.0)


def random_batch(rng, lengths) -> dict:
    """One collated batch of random pairs, a (source, target) length for each row."""
    collate = Collate(CFG.specials)
    return collate(
        [
            (i, rng.integers(4, CFG.vocab_size, s), rng.integers(4, CFG.vocab_size, t))
            for i, (s, t) in enumerate(lengths)
        ]
    )


def batches(n: int, seed: int = 0, pad: bool = True) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [random_batch(rng, rng.integers(3, 9, size=(6, 2)) if pad else np.full((6, 2), 6)) for _ in range(n)]


def systems() -> dict:
    torch.manual_seed(0)
    out = {"ours": Ours(CFG), "torch": TorchTransformer(CFG)}
    if HAS_HF:
        out["hf"] = marian(CFG)
    return out


def test_peers_have_our_size_and_give_logits_of_our_shape():
    models = systems()
    counts = check_same_size(models)
    assert set(counts) == set(models)
    b = batches(1)[0]
    for name, m in models.items():
        assert m.eval()(b["src"], b["tgt_in"]).shape == (*b["tgt_in"].shape, CFG.vocab_size), name


def test_check_same_size_rejects_a_different_model():
    wider = Ours(ModelConfig(**{**CFG.to_dict(), "ffn_dim": 128}))
    with pytest.raises(RuntimeError, match="not the same model"):
        check_same_size({"ours": Ours(CFG), "torch": wider})


@pytest.mark.parametrize("pad", [False, True])
def test_training_flops_match_torch_flop_counter(pad):
    """The analytic formula equals what torch's FlopCounterMode counts for a forward and
    backward pass of our model on a batch without padding (matrix products only). With padding
    the counter sees the padded work, which the formula leaves out, so it counts more."""
    model = Ours(CFG)
    b = batches(1, pad=pad)[0]
    with FlopCounterMode(display=False) as counter:
        model(b["src"], b["tgt_in"]).float().sum().backward()
    counted, formula = counter.get_total_flops(), training_flops(CFG, b["src"], b["tgt_in"])
    if pad:
        assert counted > formula
    else:
        assert formula == pytest.approx(counted, rel=1e-6)


def test_peak_tflops_known_gpus_and_override():
    assert peak_tflops(torch.device("cpu")) == (None, "no known peak for this device: set peak_tflops")
    assert peak_tflops(torch.device("cpu"), 123.0)[0] == 123.0


def test_time_training_runs_full_steps_for_every_system():
    """Every system takes the timed steps (its weights move) and gets a positive rate."""
    models = systems()
    before = {n: [p.detach().clone() for p in m.parameters()] for n, m in models.items()}
    timers = {n: TrainTimer(m, torch.device("cpu"), None, CFG.pad_id) for n, m in models.items()}
    data = batches(4)
    rows = time_training(timers, data, warmup=1, steps=4, rounds=2, flops=[1e9] * len(data))
    for name, m in models.items():
        assert rows[name]["steps"] == 4 and rows[name]["tgt_tok_s"] > 0 and rows[name]["tflop_s"] > 0
        assert rows[name]["tok_s"] > rows[name]["tgt_tok_s"]  # source tokens are added
        assert any(not torch.equal(a, p) for a, p in zip(before[name], m.parameters())), name


@pytest.mark.slow(reason="torch.compile traces two systems' training step")
def test_compiled_training_compiles_once_for_batches_of_every_shape():
    """compile=true: token-budget batches differ in rows and both lengths; each system's step is
    compiled once for all of them (dynamo's default compiled again for each dimension that later
    changed, and an H200 ran out of time compiling)."""
    from qkvmt.bench.stages import compiled_step

    rng = np.random.default_rng(0)
    # No batch's rows equal one of its lengths, as in real 25k-token batches: dynamo gives equal
    # sizes one symbol, and a later batch that parts them compiles again.
    shapes = [(7, 4, 9), (3, 10, 5), (9, 5, 3), (2, 13, 11), (5, 7, 12)]
    data = [random_batch(rng, [(s, t)] * rows) for rows, s, t in shapes]
    for name, model in systems().items():
        if name == "hf":
            continue  # Marian's graph breaks are its own; ours and nn.Transformer are what is timed compiled
        graphs = []

        def counting(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        timer = TrainTimer(compiled_step(model, backend=counting), torch.device("cpu"), None, CFG.pad_id)
        counts = []
        for b in data:
            timer.step(b)
            counts.append(len(graphs))
        assert counts[0] > 0 and counts[-1] == counts[0], f"{name}: graphs compiled after each batch {counts}"


def test_profile_ranks_the_operators_of_a_training_step():
    """Per-step figures: the operators' own times fit inside the step, the largest first, and a
    matrix product is among them; a CPU has no device time."""
    torch.manual_seed(0)
    timer = TrainTimer(Ours(CFG), torch.device("cpu"), None, CFG.pad_id)
    before = [p.detach().clone() for p in timer.model.parameters()]
    summary, text = profile_training(timer, batches(3), steps=3, top=8)
    assert any(not torch.equal(a, p) for a, p in zip(before, timer.model.parameters()))  # real steps ran
    assert summary["steps"] == 3 and summary["device_busy_ms"] is None
    own = [row["self_cpu_ms"] for row in summary["top"]]
    assert len(own) == 8 and own == sorted(own, reverse=True)
    assert 0 < sum(own) <= summary["step_ms"]
    assert any(row["op"] in ("aten::mm", "aten::addmm", "aten::bmm") for row in summary["top"])
    assert "Self CPU" in text
    copies = summary["copies"]  # a step copies: the padded rows of the linear layers, the merged heads
    assert copies["per_step"] >= sum(o["per_step"] for o in copies["origins"]) > 0
    assert "Copies (aten::copy_) per step" in text and copies["origins"][0]["origin"] in text


def test_copies_are_counted_under_the_operator_that_asked_for_them():
    """Two steps that each make a transposed tensor contiguous three times and cast a tensor
    twice: the copies per step, by caller and shape, are exactly those."""
    x, w = torch.randn(4, 6), torch.randn(5, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            for _ in range(3):
                x.t().contiguous()
            for _ in range(2):
                w.to(torch.float64)
    found = copy_origins(prof.events(), steps=2)
    assert found["per_step"] == 5
    assert {(o["origin"], tuple(o["shape"])): o["per_step"] for o in found["origins"]} == {
        ("aten::contiguous", (6, 4)): 3,
        (DIRECT, (5, 3)): 2,
    }


@pytest.mark.parametrize("setting", ["train.profile_steps=-1", "decode.profile_calls=-1", "decode.profile_calls=true"])
def test_a_profile_of_no_whole_number_is_refused_before_anything_is_written(tmp_path, setting):
    out = tmp_path / "bench"
    proc = run_script("benchmark", "device=cpu", f"output_dir={out}", setting)
    assert user_error(proc).startswith(f"error: {setting}: give the number of")  # as typed: true, not True
    assert not out.exists()


def test_a_bad_wait_for_the_serving_stage_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "bench"
    proc = run_script("benchmark", "device=cpu", f"output_dir={out}", "serve.batching.max_wait_ms=-5")
    assert user_error(proc) == "error: serve.batching.max_wait_ms=-5: give a number of milliseconds, at least 0"
    assert not out.exists()


@pytest.mark.parametrize(
    "setting, message",
    [
        ("model.positions=rotary", "model.positions=rotary: the peers torch and hf have sinusoidal positions only"),
        ("model.value_projection=false", "model.value_projection=false: the peers torch and hf have every projection"),
        ("data.tokenizer=separate_bpe", "a vocabulary per language, and the peers torch and hf share one between them"),
    ],
)
def test_a_model_the_peers_cannot_be_is_refused_naming_the_setting(tmp_path, setting, message):
    out = tmp_path / "bench"
    proc = run_script("benchmark", "device=cpu", f"output_dir={out}", setting)
    assert proc.returncode != 0 and message in proc.stderr and "systems=[ours]" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_device_busy_time_counts_each_kernel_once():
    """The profiler lists a kernel's time on its own row and again under the operator that
    launched it; the busy time is the kernels' rows alone."""
    mm = SimpleNamespace(device_type=DeviceType.CPU, self_device_time_total=3000.0)  # its kernels' time, in µs
    kernels = [SimpleNamespace(device_type=DeviceType.CUDA, self_device_time_total=t) for t in (2000.0, 1000.0)]
    assert device_busy_ms([mm, *kernels], steps=2) == pytest.approx(1.5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_ours_fixed_length_decodes_exactly_n_tokens(use_cache):
    torch.manual_seed(0)
    model = Ours(CFG).model.eval()
    src = batches(1)[0]["src"]
    hyps = ours_fixed_length(model, src, beam_size=3, length=9, use_cache=use_cache)()
    assert len(hyps) == src.size(0) and all(len(h.tokens) == 8 for h in hyps)  # + EOS = 9


def test_systems_take_turns_call_by_call_after_one_warm_up_each():
    calls = []
    seconds = time_in_turns({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, torch.device("cpu"), 3)
    assert calls == ["a", "b"] * 4  # one warm-up each, then 3 timed turns
    assert set(seconds) == {"a", "b"} and all(s >= 0 for s in seconds.values())


@requires_hf
def test_hf_fixed_length_generates_exactly_n_tokens():
    src = batches(1)[0]["src"]
    out = hf_fixed_length(marian(CFG).eval(), src, beam_size=3, length=9)()
    assert out.shape == (src.size(0), 10)  # the start token, then 9


def test_peak_memory_sees_what_is_allocated():
    # A block large beside what the rest of the process may free meanwhile (a CI run once saw a
    # 64 MiB block as 43 MiB: freed pages elsewhere offset part of it), so the margin is real. Free heap
    # pages go back first: after an earlier test kept freed blocks (prepare_host_memory), the block
    # would reuse pages already resident.
    release_freed_host_memory()
    with PeakMemory() as mem:
        block = np.ones(256 * 2**20, dtype=np.uint8)  # touched, so resident
    del block
    assert mem.delta >= 192 * 2**20


def test_tokenize_scaling_caches_every_token(tmp_path):
    src = ["ein Hund läuft", "zwei Katzen", "ein Mann isst"]
    tgt = ["a dog runs", "two cats", "a man eats"]
    tok = train_bpe(src + tgt, vocab_size=60)
    (row,) = tokenize_scaling(tok, src, tgt, [40])
    s, t = synthetic_pairs(src, tgt, 40)
    expected = sum(len(x) for x in encode(tok, s + t))
    assert row["pairs"] == 40 and row["tokens"] == expected
    assert row["cache_mb"] * 2**20 >= 4 * expected  # int32 ids on disk


def test_timed_batches_are_the_loaders_own_and_their_building_is_timed():
    data = batches(5)
    got, ms = timed_batches(data, 3)  # any iterable of batches: a DataLoader in the benchmark
    assert len(got) == 3 and all(a is b for a, b in zip(got, data)) and ms is not None and ms >= 0
    everything, ms = timed_batches(data, 50)  # a shorter loader gives what it has
    assert len(everything) == 5
    assert timed_batches(data[:1], 3) == ([data[0]], None)  # the first batch alone is not timed


@pytest.mark.slow
def test_benchmark_script_writes_every_key(tmp_path):
    """scripts/benchmark.py end to end on a tiny model: every system, one JSON."""
    corpus = write_corpus(tmp_path / "corpus")
    out = tmp_path / "bench"
    cmd = [
        "scripts/benchmark.py",
        "model=tiny",
        "device=cpu",
        f"output_dir={out}",
        f"data.root={corpus}",
        f"data.cache_dir={tmp_path / 'cache'}",
        "data.vocab_size=120",
        "data.max_tokens=256",
        "train.warmup_steps=1",
        "train.steps=2",
        "train.rounds=1",
        "train.profile_steps=1",
        "decode.profile_calls=1",
        "decode.sentences=4",
        "decode.length=6",
        "decode.repeats=1",
        "scaling.sentences=2",
        "scaling.lengths=[4,8]",
        "scaling.corpus_pairs=[500]",
        "analysis.sentences=3",
        "memory.steps=6",
        "memory.every=2",
        "stages=[peers,memory]",  # the imported stage: tests/bench/test_imported.py
        'memory.overrides=["data.vocab_size=120","model=tiny","data.max_tokens=256"]',
    ]
    proc = run_python(*cmd)  # in this Python: its process is not what is measured here
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads((out / "benchmark.json").read_text())
    for key in ("ours_tok_s", "torch_tok_s", "hf_tok_s", "ours_vs_torch", "ours_vs_hf", "mfu"):
        assert key in r["train"]
    for key in ("ours_sent_s", "uncached_sent_s", "hf_sent_s", "ours_vs_hf", "ours_vs_uncached"):
        assert key in r["decode"]
    assert r["train"]["ours_tok_s"] > 0 and r["train"]["torch_tok_s"] > 0 and r["train"]["batch_ms"] > 0
    assert "built in the training process" in proc.stdout
    assert r["train"]["profile"]["steps"] == 1 and "Self CPU" in (out / "profile.txt").read_text()
    assert r["decode"]["profile"]["steps"] == 1 and "aten::topk" in (out / "decode_profile.txt").read_text()
    assert r["train"]["ours_vs_torch"] == pytest.approx(r["train"]["ours_tok_s"] / r["train"]["torch_tok_s"])
    if HAS_HF:
        assert r["train"]["hf_tok_s"] > 0 and r["decode"]["hf_sent_s"] > 0
    else:  # reported as missing, not faked
        assert r["train"]["hf_tok_s"] is None and "transformers" in r["train"]["hf_missing"]
    if HAS_CT2:  # our trained weights, exported, on the same sentences
        for kind in ("float32", "int8"):
            assert r["decode"][f"ct2_{kind}_sent_s"] > 0 and r["decode"]["seconds"][f"ct2_{kind}"] > 0
            assert r["decode"][f"ours_vs_ct2_{kind}"] == pytest.approx(
                r["decode"]["ours_sent_s"] / r["decode"][f"ct2_{kind}_sent_s"]
            )
        assert "ours/ct2" in proc.stdout
    else:
        assert "ctranslate2" in r["decode"]["ctranslate2_missing"]
    assert [row["length"] for row in r["scaling"]["decode"]] == [4, 8]
    assert r["scaling"]["tokenize"][0]["pairs"] == 500
    assert r["analysis"]["sentences"] == 3 and 0 < r["analysis"]["alti_ms"] < r["analysis"]["forced_pass_ms"]
    assert r["analysis"]["intervene_ms"] > r["analysis"]["forced_pass_ms"] > 0  # two searches and two passes
    assert "an intervention (keys swapped" in proc.stdout
    assert "train ours/torch" in proc.stdout and "ALTI+ alone" in proc.stdout  # the printed table
    memory = r["memory"]  # the CPU recipe trained by train.py, its processes and test included
    assert memory["experiment"] == "multi30k_de_en_cpu" and memory["max_tokens"] == 256
    assert memory["steps"] == 6 and memory["processes"] == 2 and memory["threads"] == 1
    assert [step for step, _ in memory["rss_mb"]] == [2, 4, 6]
    # the kernel updates the high-water mark lazily: it may trail a reading by a few pages
    assert memory["peak_rss_mb"] >= max(mb for _, mb in memory["rss_mb"]) - 4 > 100
    assert memory["peak_rss_mb"] == max(memory["peak_rss_mb_per_process"])
    assert [phase for phase, _, _ in memory["high_water_mb"][0]] == ["setup", "training", "test"]
    assert memory["peak_set_in"] in ("setup", "training", "test")
    assert memory["growth_mb_per_1k_steps"] is not None and "host memory of multi30k_de_en_cpu" in proc.stdout
    # committed beside the results: no path of this machine in it
    text = (out / "benchmark.json").read_text()
    assert str(tmp_path) not in text and r["config"]["data"]["root"] == "<data.root>"


def flat(config, key: str = "") -> dict:
    if isinstance(config, dict):
        return {k: v for name, value in config.items() for k, v in flat(value, f"{key}.{name}".lstrip(".")).items()}
    return {key: config}


def test_the_memory_stage_runs_train_py_on_the_recipe_changing_only_its_length(monkeypatch):
    """The memory stage measures train.py itself: the recipe as train.py composes it, with only
    the run's folder, its length and the sampling callback changed."""
    from omegaconf import OmegaConf

    from qkvmt.bench import memory

    overrides = memory.train_overrides("multi30k_de_en_cpu", "/tmp/run", steps=300, every=50)
    recipe = compose_train("experiment=multi30k_de_en_cpu")
    measured = compose_train(*[o for o in overrides if not o.startswith("hydra.")])  # compose() has no hydra.run
    before, after = (flat(OmegaConf.to_container(c)) for c in (recipe, measured))
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {
        "trainer.max_steps",
        "trainer.max_time",
        "trainer.enable_progress_bar",
        *(f"callbacks.host_memory_samples.{k}" for k in ("_target_", "every", "folder")),
    }
    assert after["trainer.max_steps"] == 300 and after["callbacks.host_memory_samples.every"] == 50
    assert "hydra.run.dir=/tmp/run" in overrides  # train_metrics.json lands where the stage reads it
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        kwargs["stderr"].write("Error: a line\n")
        return SimpleNamespace(returncode=1)

    monkeypatch.setattr(memory.subprocess, "run", run)
    r = memory.recipe_memory("multi30k_de_en_cpu", 300, 50, ["data.max_tokens=256"], ["data.root=/x"])
    assert commands[0][:4] == [sys.executable, "-m", "qkvmt", "train"]  # the training command itself
    assert commands[0][-2:] == ["data.root=/x", "data.max_tokens=256"]  # the user's overrides win
    folder = next(a for a in commands[0] if a.startswith("hydra.run.dir="))[len("hydra.run.dir=") :]
    assert commands[0][4:-2] == memory.train_overrides("multi30k_de_en_cpu", folder, 300, 50)
    assert r["error"] == "qkvmt train exited with 1: Error: a line"


def test_the_peak_is_placed_in_the_phase_that_set_it():
    from qkvmt.bench.memory import peak_phase

    marks = [["setup", 0, 560.0], ["training", 500, 600.0], ["validation", 500, 900.0], ["training", 1200, 901.0]]
    assert peak_phase(marks) == "validation"  # a later mark within a few MB of it is the same peak
    assert peak_phase([*marks, ["test", 1200, 1200.0]]) == "test"
    assert peak_phase([]) is None


def test_growth_is_the_slope_after_the_warm_up():
    from qkvmt.bench.memory import growth_per_1k_steps

    warm_then_flat = [(100, 900.0), (200, 1300.0), (300, 1400.0), (400, 1400.0), (500, 1400.0), (600, 1400.0)]
    assert growth_per_1k_steps(warm_then_flat) == pytest.approx(0.0, abs=1e-9)
    leaking = [(s, 1000.0 + 0.5 * s) for s in range(100, 1300, 100)]  # 0.5 MB a step
    assert growth_per_1k_steps(leaking) == pytest.approx(500.0)
    assert growth_per_1k_steps([(100, 900.0)]) is None


@pytest.mark.parametrize(
    "settings, message",
    [
        (["compile=true", "compile_mode=reduce-overhead"], "compile_mode=reduce-overhead replays CUDA graphs"),
        (["compile=true", "systems=[ours,ours_align]"], "compile=true with ours_align in systems: training does not"),
    ],
)
def test_a_compiled_step_training_would_not_run_is_refused_before_anything_is_written(tmp_path, settings, message):
    out = tmp_path / "bench"
    proc = run_script("benchmark", "device=cpu", f"output_dir={out}", *settings)
    assert proc.returncode != 0 and message in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()
