"""benchmark(cfg): the function behind qkvmt benchmark (scripts/benchmark.py).

Ours, the same model built from torch.nn.Transformer, and Hugging Face's MarianMTModel are
measured side by side in one process, on the same batches and sentences: training tokens/s,
beam-5 decoding sentences/s, per-token decoding time as outputs grow, and the time and memory
to tokenize a large corpus. Our trained model, exported to CTranslate2 (float32 and int8 by
default, `decode.ctranslate2`), decodes the same sentences beside them. On a CPU, the last
stage runs qkvmt train on the CPU recipe for its host memory (qkvmt.bench.memory), and the last opens
a Hugging Face model of OPUS-MT-base's shape (qkvmt.bench.imported); `stages=` chooses among the
peers (stages 1-5), memory and imported. Writes
benchmark.json into output_dir and prints a table; `train.profile_steps=N` adds profile.txt,
where N steps of ours spent their time (qkvmt.bench.profile).
"""

import datetime
import functools
import importlib.metadata
import logging
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path

import lightning as L
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.bench.analysis import analysis_timings
from qkvmt.bench.corpus import tokenize_scaling
from qkvmt.bench.decoding import decode_ctranslate2, decode_scaling, decode_speed
from qkvmt.bench.flops import peak_tflops, training_flops
from qkvmt.bench.imported import imported_speed, marian_folder
from qkvmt.bench.memory import recipe_memory
from qkvmt.bench.peers import NO_HF, Ours, OursAligned, TorchTransformer, check_same_size, marian
from qkvmt.bench.profile import profile_training
from qkvmt.bench.table import table
from qkvmt.bench.timing import TrainTimer, ratio, time_training, timed_batches
from qkvmt.decoding.lines import encode_sources
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.model.config import ATTENTION_DEFAULTS
from qkvmt.model.inputs import build_inputs
from qkvmt.text.tokenizer import Specials
from qkvmt.training.compiled import check_compile, compiled
from qkvmt.training.hardware import choose_precision, detect
from qkvmt.training.host_memory import prepare_host_memory

log = logging.getLogger(__name__)
# precision= takes the short names or Lightning's; autocast runs in the dtype, float32 runs none.
LIGHTNING_PRECISION = {"bf16": "bf16-mixed", "fp16": "16-mixed", "fp32": "32-true"}
STAGES = ("peers", "memory", "imported")  # what stages= may name, in the order they run
DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16, "32-true": None}


def benchmark(cfg: DictConfig) -> dict:
    prepare_host_memory()  # as training does; process-wide settings, so every system gets them
    L.seed_everything(cfg.seed)
    device, hardware, precision, why = _settings(cfg)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    dm = instantiate(cfg.data)
    result = {
        "device": _device_name(hardware),
        "hardware": hardware.to_dict(),
        "date": datetime.date.today().isoformat(),
        "versions": _versions(),
        "precision": precision,
        "precision_reason": why,
        "compile": {"train": bool(cfg.compile), "mode": cfg.compile_mode, "decode": False},
        "stages": list(cfg.stages),
        "config": without_machine_paths(OmegaConf.to_container(cfg, resolve=True)),
    }
    if "peers" in cfg.stages:
        result |= _peers(cfg, dm, device, precision, out, result["device"])
    if "memory" in cfg.stages:
        result["memory"] = _memory(cfg, device)
    if "imported" in cfg.stages:
        result["imported"] = _imported(cfg, dm)
    write_json(out / "benchmark.json", result)
    print(table(result))
    log.info("wrote %s", out / "benchmark.json")
    return result


def _peers(cfg, dm, device, precision: str, out: Path, device_name: str) -> dict:
    """Stages 1 to 5: ours and the peers built alike, trained on the same batches, then decoding."""
    tokenizer = dm.load_tokenizer(out / "tokenizer.json")
    longest = max(cfg.scaling.lengths) + 1 if cfg.scaling.lengths else 0
    model_cfg = instantiate(cfg.model)(
        vocab_size=tokenizer.get_vocab_size(),
        max_positions=max(cfg.model.max_positions, longest),
        **Specials.of(tokenizer).config_fields(),
    )
    present = _systems(cfg, model_cfg)
    params = check_same_size(present)
    # compile=true compiles the training step of every system. Decoding stays eager for all:
    # each step has a new cache length, which would recompile or need dynamic shapes.
    trained = {name: _compiled(m, cfg.compile_mode) if cfg.compile else m for name, m in present.items()}
    log.info("stage 1/7, training speed: %s on %s", ", ".join(present), device_name)
    batches, batch_ms = timed_batches(dm.train_dataloader(), cfg.train.warmup_steps + cfg.train.steps)
    train = _train(cfg, model_cfg, trained, batches, device, DTYPES[precision], out) | {"batch_ms": batch_ms}
    return {"params": params, "train": train} | _decoding_and_analysis(cfg, present, dm, tokenizer, model_cfg, device)


def _settings(cfg) -> tuple[torch.device, object, str, str]:
    """The device, its hardware, the training precision and why, every setting checked first."""
    device = _device(cfg.device)
    hardware = detect(device.type)
    precision, why = choose_precision(LIGHTNING_PRECISION.get(cfg.precision, cfg.precision), hardware, "precision")
    check_compile(cfg.compile, cfg.compile_mode, device.type, "")
    if cfg.compile and "ours_align" in cfg.systems:
        raise UserError(
            "compile=true with ours_align in systems: training does not compile an alignment-supervised step; "
            "benchmark ours_align with compile=false"
        )
    unknown = sorted(set(cfg.stages) - set(STAGES))
    if unknown or not cfg.stages:
        raise UserError(f"stages={list(cfg.stages)}: give some of {', '.join(STAGES)}")
    if precision not in DTYPES:
        raise UserError(f"precision={cfg.precision!r}: use auto, bf16, fp16 or fp32")
    if cfg.train.profile_steps < 0:
        raise UserError(
            f"train.profile_steps={cfg.train.profile_steps}: give the number of steps to profile, or 0 to skip"
        )
    peers = [name for name in ("torch", "hf") if name in cfg.systems]
    if cfg.model.positions != "sinusoidal" and peers:  # the same model in each peer, or no comparison
        raise UserError(
            f"model.positions={cfg.model.positions}: the peers {' and '.join(peers)} have sinusoidal positions "
            "only; benchmark it with 'systems=[ours]' (or [ours,ours_align])"
        )
    ablated = [
        f"model.{k}={str(cfg.model[k]).lower()}" for k, v in ATTENTION_DEFAULTS.items() if cfg.model.get(k, v) != v
    ]
    if ablated and peers:
        raise UserError(
            f"{', '.join(ablated)}: the peers {' and '.join(peers)} have every projection of the paper's attention; "
            "benchmark it with 'systems=[ours]' (or [ours,ours_align])"
        )
    log.info("%s (CPU capability %s); precision %s: %s", hardware.name, hardware.cpu_capability, precision, why)
    return device, hardware, precision, why


def _systems(cfg, model_cfg) -> dict:
    """Each system of `systems=` built with the same dimensions; HF's left out without transformers."""
    builders = {
        "ours": lambda c: Ours(c, cfg.sdpa_backend),
        "ours_align": lambda c: OursAligned(c, instantiate(cfg.alignment), cfg.sdpa_backend),
        "torch": TorchTransformer,
        "hf": marian,  # None without transformers
    }
    models = {name: builders[name](model_cfg) for name in cfg.systems}
    return {name: m for name, m in models.items() if m is not None}


def _decoding_and_analysis(cfg, present: dict, dm, tokenizer, model_cfg, device) -> dict:
    """Stages 2 to 5, on the trained weights, uncompiled: decoding, its scaling with output
    length, the analysis of one sentence, and tokenizing large corpora."""
    log.info("stage 2/7, beam-%d decoding: %s", cfg.decode.beam_size, ", ".join(present))
    sources = dm.read("val")[0][: cfg.decode.sentences]
    ids = encode_sources(tokenizer, sources, model_cfg.max_positions)
    src = build_inputs(ids, None, model_cfg.specials, model_cfg.max_positions).src.to(device)
    models = {name: m.eval() for name, m in present.items()}
    decode = decode_speed(cfg, models, src, device)
    decode |= decode_ctranslate2(cfg, models.get("ours"), tokenizer, src, decode)
    log.info("stage 3/7, decoding time per token at output lengths %s", list(cfg.scaling.lengths) or "(none)")
    lengths = decode_scaling(cfg, models.get("ours"), src[: cfg.scaling.sentences], device)
    log.info(
        "stage 4/7, analysis of one sentence (value norms, token scores, ALTI+), %d validation pairs",
        cfg.analysis.sentences,
    )
    analysis = analysis_timings(models.get("ours"), tokenizer, dm.read("val"), cfg.analysis.sentences)
    log.info(
        "stage 5/7, tokenizing and caching %s pairs", ", ".join(f"{n:,}" for n in cfg.scaling.corpus_pairs) or "no"
    )
    scaling = {
        "decode": lengths,
        "tokenize": tokenize_scaling(tokenizer, *dm.training_pairs(), list(cfg.scaling.corpus_pairs)),
    }
    if len(lengths) > 1:
        scaling["cached_last_vs_first"] = lengths[-1]["cached_ms_per_token"] / lengths[0]["cached_ms_per_token"]
    return {"decode": decode, "analysis": analysis, "scaling": scaling}


def _train(cfg, model_cfg, models: dict, batches: list[dict], device, dtype, out_dir: Path) -> dict:
    timers = {name: TrainTimer(m, device, dtype, model_cfg.pad_id) for name, m in models.items()}
    flops = [training_flops(model_cfg, b["src"], b["tgt_in"]) for b in batches]
    rows = time_training(timers, batches, cfg.train.warmup_steps, cfg.train.steps, cfg.train.rounds, flops)
    profiled = None
    if cfg.train.profile_steps and "ours" not in timers:
        log.info("  profile: skipped, it profiles ours and systems=%s", list(timers))
    elif cfg.train.profile_steps:
        log.info("  profile: ours, %d steps (profile.txt)", cfg.train.profile_steps)
        profiled, text = profile_training(timers["ours"], batches, cfg.train.profile_steps)
        write_text(out_dir / "profile.txt", text)
    peak, peak_source = peak_tflops(device, cfg.peak_tflops)
    out = {
        "max_tokens": cfg.data.max_tokens,
        "peak_tflops": peak,
        "peak_source": peak_source,
        "systems": rows,
        "profile": profiled,
    }
    for name in ("ours", "torch", "hf"):
        out[f"{name}_tok_s"] = rows[name]["tgt_tok_s"] if name in rows else None
        out[f"{name}_src_tgt_tok_s"] = rows[name]["tok_s"] if name in rows else None
    for name, row in rows.items():
        row["mfu"] = row["tflop_s"] / peak if peak else None
    out["mfu"] = rows["ours"]["mfu"] if "ours" in rows else None
    out["ours_vs_torch"] = ratio(out["ours_tok_s"], out["torch_tok_s"])
    out["ours_vs_hf"] = ratio(out["ours_tok_s"], out["hf_tok_s"])
    if "ours_align" in rows:  # the cost of alignment supervision in training speed
        out["ours_align_tok_s"] = rows["ours_align"]["tgt_tok_s"]
        out["ours_align_vs_ours"] = ratio(out["ours_align_tok_s"], out["ours_tok_s"])
    if "hf" in cfg.systems and "hf" not in rows:
        out["hf_missing"] = NO_HF
    return out


def _memory(cfg, device) -> dict | None:
    """The CPU recipe's host memory as qkvmt train trains it (qkvmt.bench.memory), on a CPU run only."""
    m = cfg.memory
    if not m.experiment or device.type != "cpu":
        return None
    log.info("stage 6/7, host memory: qkvmt train on %s for %d steps, in a process of its own", m.experiment, m.steps)
    paths = [f"data.root={cfg.data.root}", f"data.cache_dir={cfg.data.cache_dir}"]
    return recipe_memory(m.experiment, m.steps, m.every, list(m.overrides), paths)


def _imported(cfg, dm) -> dict:
    """Stage 7: an imported Hugging Face model of OPUS-MT-base's shape (qkvmt.bench.imported)."""
    c = cfg.imported
    log.info(
        "stage 7/7, an imported Marian model (d_model %d, %d+%d layers, %d-token vocabulary)",
        c.d_model,
        c.layers,
        c.layers,
        c.vocab_size,
    )
    with tempfile.TemporaryDirectory() as folder:
        made = marian_folder(c, dm.training_pairs(), (dm.src_lang, dm.tgt_lang), Path(folder) / "marian")
        return imported_speed(c, made, dm.read("val"))


def _compiled(model, mode: str = "default", backend: str | Callable = "inductor"):
    """qkvmt.training.compiled of what a training step runs: ours' `loss` (the training loss), a
    peer's forward."""
    compile_ = functools.partial(compiled, mode=mode, backend=backend)
    if hasattr(model, "loss"):
        model.loss = compile_(model.loss)
        return model
    return compile_(model)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device={name} but torch sees no GPU: use device=cpu")
    return torch.device(name)


def without_machine_paths(config, key: str = ""):
    """The configuration with every absolute path replaced by `<its key>`: a benchmark.json is
    meant to be committed beside the results, and must not carry the paths of the machine."""
    if isinstance(config, dict):
        return {k: without_machine_paths(v, f"{key}.{k}" if key else k) for k, v in config.items()}
    if isinstance(config, list):
        return [without_machine_paths(v, f"{key}[{i}]") for i, v in enumerate(config)]
    if isinstance(config, str) and Path(config).expanduser().is_absolute():
        return f"<{key}>"
    return config


def _device_name(hardware) -> str:
    return hardware.name if hardware.device == "cuda" else f"{hardware.name}, {torch.get_num_threads()} threads"


def _versions() -> dict:
    try:
        hf = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        hf = None
    return {"torch": torch.__version__, "transformers": hf, "python": platform.python_version()}
