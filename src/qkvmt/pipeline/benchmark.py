"""benchmark(cfg): the function behind scripts/benchmark.py.

Ours, the same model built from torch.nn.Transformer, and Hugging Face's MarianMTModel are
measured side by side in one process, on the same batches and sentences: training tokens/s,
beam-5 decoding sentences/s, per-token decoding time as outputs grow, and the time and memory
to tokenize a large corpus. Our trained model, exported to CTranslate2 (float32 and int8 by
default, `decode.ctranslate2`), decodes the same sentences beside them. Writes benchmark.json
into output_dir and prints a table; `train.profile_steps=N` adds profile.txt, where N steps of
ours spent their time (qkvmt.bench.profile).
"""

import copy
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
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.bench.analysis import analysis_timings
from qkvmt.bench.corpus import tokenize_scaling
from qkvmt.bench.flops import peak_tflops, training_flops
from qkvmt.bench.memory import recipe_memory
from qkvmt.bench.peers import Ours, OursAligned, TorchTransformer, check_same_size, marian
from qkvmt.bench.profile import profile_training
from qkvmt.bench.table import table
from qkvmt.bench.timing import (
    TrainTimer,
    ct2_fixed_length,
    hf_fixed_length,
    ours_fixed_length,
    time_call,
    time_training,
    timed_batches,
)
from qkvmt.decoding.lines import encode_sources
from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import export_ctranslate2, require_ctranslate2
from qkvmt.files import write_json, write_text
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.inputs import build_inputs
from qkvmt.text.tokenizer import Specials
from qkvmt.training.hardware import choose_precision, detect
from qkvmt.training.host_memory import prepare_host_memory

log = logging.getLogger(__name__)
# precision= takes the short names or Lightning's; autocast runs in the dtype, float32 runs none.
LIGHTNING_PRECISION = {"bf16": "bf16-mixed", "fp16": "16-mixed", "fp32": "32-true"}
DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16, "32-true": None}
NO_HF = "transformers is not installed: pip install -e '.[bench]'"


def benchmark(cfg: DictConfig) -> dict:
    prepare_host_memory()  # as training does; process-wide settings, so every system gets them
    L.seed_everything(cfg.seed)
    device = _device(cfg.device)
    hardware = detect(device.type)
    precision, why = choose_precision(LIGHTNING_PRECISION.get(cfg.precision, cfg.precision), hardware, "precision")
    if precision not in DTYPES:
        raise UserError(f"precision={cfg.precision!r}: use auto, bf16, fp16 or fp32")
    dtype = DTYPES[precision]
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
    log.info("%s (CPU capability %s); precision %s: %s", hardware.name, hardware.cpu_capability, precision, why)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    dm = instantiate(cfg.data)
    tokenizer = dm.load_tokenizer(out / "tokenizer.json")
    longest = max(cfg.scaling.lengths) + 1 if cfg.scaling.lengths else 0
    model_cfg = instantiate(cfg.model)(
        vocab_size=tokenizer.get_vocab_size(),
        max_positions=max(cfg.model.max_positions, longest),
        **Specials.of(tokenizer).config_fields(),
    )
    builders = {
        "ours": lambda c: Ours(c, cfg.sdpa_backend),
        "ours_align": lambda c: OursAligned(c, instantiate(cfg.alignment), cfg.sdpa_backend),
        "torch": TorchTransformer,
        "hf": marian,  # None without transformers
    }
    models = {name: builders[name](model_cfg) for name in cfg.systems}
    present = {name: m for name, m in models.items() if m is not None}
    params = check_same_size(present)
    # compile=true compiles the training step of every system. Decoding stays eager for all:
    # each step has a new cache length, which would recompile or need dynamic shapes.
    trained = {name: _compiled(m) if cfg.compile else m for name, m in present.items()}

    result = {
        "device": _device_name(hardware),
        "hardware": hardware.to_dict(),
        "date": datetime.date.today().isoformat(),
        "versions": _versions(),
        "precision": precision,
        "precision_reason": why,
        "compile": {"train": bool(cfg.compile), "decode": False},
        "params": params,
        "config": without_machine_paths(OmegaConf.to_container(cfg, resolve=True)),
    }
    log.info("stage 1/6, training speed: %s on %s", ", ".join(present), result["device"])
    batches, batch_ms = timed_batches(dm.train_dataloader(), cfg.train.warmup_steps + cfg.train.steps)
    result["train"] = _train(cfg, model_cfg, trained, batches, device, dtype, out) | {"batch_ms": batch_ms}

    log.info("stage 2/6, beam-%d decoding: %s", cfg.decode.beam_size, ", ".join(present))
    sources = dm.read("val")[0][: cfg.decode.sentences]
    ids = encode_sources(tokenizer, sources, model_cfg.max_positions)
    src = build_inputs(ids, None, model_cfg.specials, model_cfg.max_positions).src.to(device)
    eval_models = {name: m.eval() for name, m in present.items()}  # the trained weights, uncompiled
    result["decode"] = _decode(cfg, eval_models, src, device)
    result["decode"] |= _decode_ctranslate2(cfg, eval_models.get("ours"), tokenizer, src, result["decode"])
    log.info("stage 3/6, decoding time per token at output lengths %s", list(cfg.scaling.lengths) or "(none)")
    scaling = _scaling(cfg, eval_models.get("ours"), src[: cfg.scaling.sentences], device)
    log.info(
        "stage 4/6, analysis of one sentence (value norms, token scores, ALTI+), %d validation pairs",
        cfg.analysis.sentences,
    )
    result["analysis"] = analysis_timings(eval_models.get("ours"), tokenizer, dm.read("val"), cfg.analysis.sentences)
    log.info(
        "stage 5/6, tokenizing and caching %s pairs", ", ".join(f"{n:,}" for n in cfg.scaling.corpus_pairs) or "no"
    )
    result["scaling"] = {
        "decode": scaling,
        "tokenize": tokenize_scaling(tokenizer, *dm.training_pairs(), list(cfg.scaling.corpus_pairs)),
    }
    result["memory"] = _memory(cfg, device)
    lengths = result["scaling"]["decode"]
    if len(lengths) > 1:
        result["scaling"]["cached_last_vs_first"] = (
            lengths[-1]["cached_ms_per_token"] / lengths[0]["cached_ms_per_token"]
        )
    write_json(out / "benchmark.json", result)
    print(table(result))
    log.info("wrote %s", out / "benchmark.json")
    return result


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
    out["ours_vs_torch"] = _ratio(out["ours_tok_s"], out["torch_tok_s"])
    out["ours_vs_hf"] = _ratio(out["ours_tok_s"], out["hf_tok_s"])
    if "ours_align" in rows:  # the cost of alignment supervision in training speed
        out["ours_align_tok_s"] = rows["ours_align"]["tgt_tok_s"]
        out["ours_align_vs_ours"] = _ratio(out["ours_align_tok_s"], out["ours_tok_s"])
    if "hf" in cfg.systems and "hf" not in rows:
        out["hf_missing"] = NO_HF
    return out


def _decode(cfg, models: dict, src: torch.Tensor, device) -> dict:
    d = cfg.decode
    n = src.size(0)
    runs = {}
    if "ours" in models:
        ours = models["ours"].model
        log.info("  decoding: ours, cached and uncached (%d sentences, %d repeats)", n, d.repeats)
        runs["ours"] = time_call(ours_fixed_length(ours, src, d.beam_size, d.length, True), device, d.repeats)[0]
        runs["uncached"] = time_call(ours_fixed_length(ours, src, d.beam_size, d.length, False), device, d.repeats)[0]
    if "hf" in models:
        log.info("  decoding: hf generate")
        runs["hf"] = time_call(hf_fixed_length(models["hf"], src, d.beam_size, d.length), device, d.repeats)[0]
    out = {"sentences": n, "beam_size": d.beam_size, "output_tokens": d.length, "seconds": runs}
    for name in ("ours", "uncached", "hf"):
        out[f"{name}_sent_s"] = n / runs[name] if name in runs else None
    out["ours_vs_hf"] = _ratio(out["ours_sent_s"], out["hf_sent_s"])
    out["ours_vs_uncached"] = _ratio(out["ours_sent_s"], out["uncached_sent_s"])
    if "hf" in cfg.systems and "hf" not in models:
        out["hf_missing"] = NO_HF
    return out


def _memory(cfg, device) -> dict | None:
    """The CPU recipe's host memory over training (qkvmt.bench.memory), on a CPU run only."""
    m = cfg.memory
    if not m.experiment or device.type != "cpu":
        return None
    log.info("stage 6/6, host memory: %d training steps of %s in a fresh process", m.steps, m.experiment)
    if not HydraConfig.initialized():  # benchmark() called from Python: no config folder to compose the recipe from
        return {"experiment": m.experiment, "error": "run scripts/benchmark.py: the recipe is composed from its conf/"}
    main = next(s for s in HydraConfig.get().runtime.config_sources if s.provider == "main")  # our conf/
    overrides = [f"data.root={cfg.data.root}", f"data.cache_dir={cfg.data.cache_dir}", *m.overrides]
    return recipe_memory(main.path, m.experiment, m.steps, m.every, overrides)


def _compiled(model, backend: str | Callable = "inductor"):
    """torch.compile of what a training step runs: ours' `loss` (the training loss), a peer's forward.
    Dynamic from the start: token-budget batches differ in rows and both lengths, and dynamo's
    default compiles a static graph first, then again once shapes change (and again for a dimension
    that stayed put until then). On an H200 the default timed no step in 140 s."""
    compile_ = functools.partial(torch.compile, backend=backend, dynamic=True)
    if hasattr(model, "loss"):
        model.loss = compile_(model.loss)
        return model
    return compile_(model)


def _decode_ctranslate2(cfg, ours, tokenizer, src: torch.Tensor, decoded: dict) -> dict:
    """Our trained weights exported to CTranslate2 (each type in decode.ctranslate2), decoding
    the same sentences with the same beam and forced length on the same device."""
    types = list(cfg.decode.ctranslate2 or [])
    if ours is None or not types:
        return {}
    try:
        ctranslate2 = require_ctranslate2()
    except UserError as e:
        return {"ctranslate2_missing": str(e)}
    d, c = cfg.decode, ours.model.cfg
    device = "cuda" if src.is_cuda else "cpu"
    sources = [[tokenizer.id_to_token(i) for i in row if i not in (c.pad_id, c.eos_id)] for row in src.tolist()]
    out = {"ctranslate2_version": ctranslate2.__version__}
    with tempfile.TemporaryDirectory() as folder:
        meta = CheckpointMeta(model_config=c.to_dict(), tokenizer=tokenizer.to_str(), src_lang="", tgt_lang="")
        export_ctranslate2(copy.deepcopy(ours.model).float().cpu(), tokenizer, meta, Path(folder))
        for compute_type in types:
            log.info("  decoding: ctranslate2 %s", compute_type)
            translator = ctranslate2.Translator(
                folder, device=device, compute_type=compute_type, intra_threads=torch.get_num_threads()
            )
            run = ct2_fixed_length(translator, sources, d.beam_size, d.length)
            decoded["seconds"]["ct2_" + compute_type] = seconds = time_call(run, src.device, d.repeats)[0]
            out[f"ct2_{compute_type}_sent_s"] = src.size(0) / seconds
            out[f"ours_vs_ct2_{compute_type}"] = _ratio(decoded["ours_sent_s"], out[f"ct2_{compute_type}_sent_s"])
    return out


def _scaling(cfg, ours, src: torch.Tensor, device) -> list[dict]:
    """ms per generated token (per sentence) at each forced output length, cached and uncached."""
    if ours is None:
        return []
    model = ours.model
    rows = []
    for k, length in enumerate(cfg.scaling.lengths, 1):
        log.info("  length %d (%d/%d)", length, k, len(cfg.scaling.lengths))
        row = {"length": length}
        for name, cached in (("cached", True), ("uncached", False)):
            if cached or cfg.scaling.uncached:
                fn = ours_fixed_length(model, src, cfg.decode.beam_size, length, cached)
                seconds = time_call(fn, device, cfg.decode.repeats)[0]
                row[f"{name}_ms_per_token"] = 1000 * seconds / (length * src.size(0))
        rows.append(row)
    return rows


def _ratio(a, b):
    return a / b if a is not None and b else None


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
