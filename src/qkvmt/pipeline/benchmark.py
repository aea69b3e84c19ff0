"""benchmark(cfg): the function behind qkvmt benchmark (scripts/benchmark.py).

Ours, the same model built from torch.nn.Transformer, and Hugging Face's MarianMTModel are
measured side by side in one process, on the same batches and sentences: training tokens/s,
beam-5 decoding sentences/s, per-token decoding time as outputs grow, and the time and memory
to tokenize a large corpus. Our trained model, exported to CTranslate2 (float32 and int8 by
default, `decode.ctranslate2`), decodes the same sentences beside them. On a CPU, the last
stage runs qkvmt train on the CPU recipe for its host memory (qkvmt.bench.memory), and the last opens
a Hugging Face model of OPUS-MT-base's shape (qkvmt.bench.imported), and `qkvmt serve` under
concurrent clients (qkvmt.bench.serving); a synthetic WMT-sized corpus read by path is stage 9
(qkvmt.bench.large_corpus), and the hooks API's goals stage 10 (qkvmt.bench.hooks); `stages=` chooses
among the peers (stages 1-5), memory, imported, serve, corpus and hooks, each run by
qkvmt.bench.stages; this module checks the settings first (the stages' own:
qkvmt.bench.settings). Writes benchmark.json into output_dir, which appears only when every stage has
run, and prints a table; `train.profile_steps=N` adds profile.txt, where N steps of ours spent their
time, and `decode.profile_calls=N` decode_profile.txt, where N of its beam searches did
(qkvmt.bench.profile).
"""

import datetime
import importlib.metadata
import logging
import platform
from dataclasses import asdict
from pathlib import Path

import lightning as L
import torch
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.bench.settings import check_settings
from qkvmt.bench.stages import DTYPES, hooks, host_memory, imported, large_corpus, peers, serving
from qkvmt.bench.table import table
from qkvmt.errors import UserError
from qkvmt.files import StagedFolder, check_new_output, write_json
from qkvmt.host.hardware import choose_precision, detect
from qkvmt.host.process_memory import prepare_host_memory
from qkvmt.model.config import ATTENTION_DEFAULTS
from qkvmt.model.linear import float32_kernel
from qkvmt.setting_types import as_typed
from qkvmt.training.compiled import check_compile

log = logging.getLogger(__name__)
# precision= takes the short names or Lightning's; autocast runs in the dtype, float32 runs none.
LIGHTNING_PRECISION = {"bf16": "bf16-mixed", "fp16": "16-mixed", "fp32": "32-true"}
STAGES = ("peers", "memory", "imported", "serve", "corpus", "hooks")  # what stages= may name, in the order they run


def benchmark(cfg: DictConfig) -> dict:
    prepare_host_memory()  # as training does; process-wide settings, so every system gets them
    device, hardware, precision, why = _settings(cfg)
    L.seed_everything(cfg.seed)
    final = Path(str(cfg.output_dir))  # output_dir=5: Hydra gives a number
    # whole or not at all: the stages write into a hidden folder beside it (qkvmt.files.StagedFolder)
    with StagedFolder(final.parent, final.name, final=lambda: final) as out:
        dm = instantiate(cfg.data)
        result = {
            "device": _device_name(hardware),
            "hardware": hardware.to_dict(),
            "date": datetime.date.today().isoformat(),
            "versions": _versions(),
            "precision": precision,
            "precision_reason": why,
            "float32_linear": asdict(float32_kernel()),  # what decoding's products ran on, and why
            "compile": {"train": bool(cfg.compile), "mode": cfg.compile_mode, "decode": False},
            "stages": list(cfg.stages),
            "config": without_machine_paths(OmegaConf.to_container(cfg, resolve=True)),
        }
        if "peers" in cfg.stages:
            result |= peers(cfg, dm, device, precision, out, result["device"])
        if "memory" in cfg.stages:
            result["memory"] = host_memory(cfg, device)
        if "imported" in cfg.stages:
            result["imported"] = imported(cfg, dm)
        if "serve" in cfg.stages:
            result["serve"] = serving(cfg, dm, device)
        if "corpus" in cfg.stages:
            result["corpus"] = large_corpus(cfg)
        if "hooks" in cfg.stages:
            result["hooks"] = hooks(cfg, dm)
        write_json(out / "benchmark.json", result)
    print(table(result))
    log.info("wrote %s", final / "benchmark.json")
    return result


def _settings(cfg) -> tuple[torch.device, object, str, str]:
    """The device, its hardware, the training precision and why, every setting checked first."""
    device = _device(cfg.device)
    hardware = detect(device.type)
    precision, why = choose_precision(LIGHTNING_PRECISION.get(cfg.precision, cfg.precision), hardware, "precision")
    if not OmegaConf.is_list(cfg.stages) or not cfg.stages or set(cfg.stages) - set(STAGES):
        raise UserError(f"stages={as_typed(cfg.stages)}: give some of {', '.join(STAGES)}, e.g. '[peers,serve]'")
    check_settings(cfg)  # systems and every stage's section (qkvmt.bench.settings)
    check_compile(cfg.compile, cfg.compile_mode, device.type, "")
    if cfg.compile and "ours_align" in cfg.systems:
        raise UserError(
            "compile=true with ours_align in systems: training does not compile an alignment-supervised step; "
            "benchmark ours_align with compile=false"
        )
    check_new_output(Path(str(cfg.output_dir)), "output_dir", folder=True)
    if precision not in DTYPES:
        raise UserError(f"precision={cfg.precision!r}: use auto, bf16, fp16 or fp32")
    peers = [name for name in ("torch", "hf") if name in cfg.systems]
    if cfg.model.positions != "sinusoidal" and peers:  # the same model in each peer, or no comparison
        raise UserError(
            f"model.positions={cfg.model.positions}: the peers {' and '.join(peers)} have sinusoidal positions "
            "only; benchmark it with 'systems=[ours]' (or [ours,ours_align])"
        )
    if peers and get_class(cfg.data.tokenizer._target_).separate:
        raise UserError(
            f"data.tokenizer makes a vocabulary per language, and the peers {' and '.join(peers)} share one between "
            "them: benchmark it with 'systems=[ours]' (or [ours,ours_align])"
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
