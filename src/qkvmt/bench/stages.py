"""The benchmark's stages (`qkvmt benchmark`, whose settings `cfg` is): ours and its peers built
alike and trained on the same batches (1), then decoding (2), its scaling with output length (3),
the analysis of one sentence (4) and tokenizing large corpora (5), on the trained weights; the CPU
recipe's host memory (6); an imported Marian model of OPUS-MT-base's shape (7); `qkvmt serve`
under concurrent clients against the model's own translate (8); a WMT-sized corpus read by path (9);
the hooks API's goals (10)."""

import contextlib
import functools
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from hydra.utils import instantiate

from qkvmt.bench.analysis import analysis_timings
from qkvmt.bench.corpus import tokenize_scaling
from qkvmt.bench.decoding import decode_scaling, decode_speed
from qkvmt.bench.flops import peak_tflops, training_flops
from qkvmt.bench.hooks import hooks_speed
from qkvmt.bench.imported import imported_speed, marian_folder
from qkvmt.bench.large_corpus import corpus_stage
from qkvmt.bench.memory import recipe_memory
from qkvmt.bench.peers import NO_HF, Ours, OursAligned, TorchTransformer, check_same_size, marian
from qkvmt.bench.profile import profile_training
from qkvmt.bench.serving import serving_speed
from qkvmt.bench.timing import TrainTimer, ratio, time_training, timed_batches
from qkvmt.data.vocabularies import model_sizes
from qkvmt.decoding.lines import encode_sources
from qkvmt.files import write_text
from qkvmt.model.inputs import build_inputs
from qkvmt.training.compiled import compiled

log = logging.getLogger(__name__)
DTYPES = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16, "32-true": None}  # autocast's; float32 runs none


def peers(cfg, dm, device, precision: str, out: Path, device_name: str) -> dict:
    """Stages 1 to 5: ours and the peers built alike, trained on the same batches, then decoding."""
    tokenizer = dm.load_tokenizer(out / "tokenizer.json")
    longest = max(cfg.scaling.lengths) + 1 if cfg.scaling.lengths else 0
    model_cfg = instantiate(cfg.model)(
        max_positions=max(cfg.model.max_positions, longest), **model_sizes(tokenizer, dm.vocabulary)
    )
    present = systems(cfg, model_cfg)
    params = check_same_size(present)
    # compile=true compiles the training step of every system. Decoding stays eager for all:
    # each step has a new cache length, which would recompile or need dynamic shapes.
    trained = {name: compiled_step(m, cfg.compile_mode) if cfg.compile else m for name, m in present.items()}
    log.info("stage 1/10, training speed: %s on %s", ", ".join(present), device_name)
    batches, batch_ms = timed_batches(dm.train_dataloader(), cfg.train.warmup_steps + cfg.train.steps)
    train = train_speed(cfg, model_cfg, trained, batches, device, DTYPES[precision], out) | {"batch_ms": batch_ms}
    return {"params": params, "train": train} | decoding_and_analysis(
        cfg, present, dm, tokenizer, model_cfg, device, out
    )


def systems(cfg, model_cfg) -> dict:
    """Each system of `systems=` built with the same dimensions; HF's left out without transformers."""
    builders = {
        "ours": lambda c: Ours(c, cfg.sdpa_backend),
        "ours_align": lambda c: OursAligned(c, instantiate(cfg.alignment), cfg.sdpa_backend),
        "torch": TorchTransformer,
        "hf": marian,  # None without transformers
    }
    models = {name: builders[name](model_cfg) for name in cfg.systems}
    return {name: m for name, m in models.items() if m is not None}


def decoding_and_analysis(cfg, present: dict, dm, tokenizer, model_cfg, device, out: Path) -> dict:
    """Stages 2 to 5, on the trained weights, uncompiled: decoding, its scaling with output
    length, the analysis of one sentence, and tokenizing large corpora."""
    log.info("stage 2/10, beam-%d decoding: %s", cfg.decode.beam_size, ", ".join(present))
    sources = dm.read("val")[0][: cfg.decode.sentences]
    ids = encode_sources(tokenizer, sources, model_cfg.max_positions)
    src = build_inputs(ids, None, model_cfg.specials, model_cfg.max_positions).src.to(device)
    models = {name: m.eval() for name, m in present.items()}
    decode = decode_speed(cfg, models, tokenizer, src, device, out, dm.tokenizer_files)
    log.info("stage 3/10, decoding time per token at output lengths %s", list(cfg.scaling.lengths) or "(none)")
    lengths = decode_scaling(cfg, models.get("ours"), src[: cfg.scaling.sentences], device)
    log.info(
        "stage 4/10, analysis of one sentence (value norms, token scores, ALTI+), %d validation pairs",
        cfg.analysis.sentences,
    )
    analysis = analysis_timings(models.get("ours"), tokenizer, dm.read("val"), cfg.analysis.sentences)
    log.info(
        "stage 5/10, tokenizing and caching %s pairs", ", ".join(f"{n:,}" for n in cfg.scaling.corpus_pairs) or "no"
    )
    scaling = {
        "decode": lengths,
        "tokenize": tokenize_scaling(tokenizer, *dm.training_pairs(), list(cfg.scaling.corpus_pairs)),
    }
    if len(lengths) > 1:
        scaling["cached_last_vs_first"] = lengths[-1]["cached_ms_per_token"] / lengths[0]["cached_ms_per_token"]
    return {"decode": decode, "analysis": analysis, "scaling": scaling}


def train_speed(cfg, model_cfg, models: dict, batches: list[dict], device, dtype, out_dir: Path) -> dict:
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


def host_memory(cfg, device) -> dict | None:
    """The CPU recipe's host memory as qkvmt train trains it (qkvmt.bench.memory), on a CPU run only."""
    m = cfg.memory
    if not m.experiment or device.type != "cpu":
        return None
    log.info("stage 6/10, host memory: qkvmt train on %s for %d steps, in a process of its own", m.experiment, m.steps)
    paths = [f"data.root={cfg.data.root}", f"data.cache_dir={cfg.data.cache_dir}"]
    return recipe_memory(m.experiment, m.steps, m.every, list(m.overrides), paths)


def imported(cfg, dm) -> dict:
    """Stage 7: an imported Hugging Face model of OPUS-MT-base's shape (qkvmt.bench.imported)."""
    c = cfg.imported
    log.info(
        "stage 7/10, an imported Marian model (d_model %d, %d+%d layers, %d-token vocabulary)",
        c.d_model,
        c.layers,
        c.layers,
        c.vocab_size,
    )
    with marian_of(cfg, dm) as made:
        return imported_speed(c, made, dm.read("val"))


@contextlib.contextmanager
def marian_of(cfg, dm):
    """A Marian folder of `imported.*`'s shape, its SentencePiece models trained on the data's, for the block."""
    with tempfile.TemporaryDirectory() as folder:
        yield marian_folder(cfg.imported, dm.training_pairs(), (dm.src_lang, dm.tgt_lang), Path(folder) / "marian")


def serving(cfg, dm, device) -> dict:
    """Stage 8: qkvmt serve's sentences/s under concurrent clients against translate's (qkvmt.bench.serving)."""
    import qkvmt

    c = cfg.serve
    log.info(
        "stage 8/10, qkvmt serve of %s: %d clients, %d sentences a request, beam %d",
        c.ckpt_path,
        c.clients,
        c.per_request,
        c.beam_size,
    )
    model = qkvmt.load(c.ckpt_path, device=device.type)
    return serving_speed(c, model, dm.read("val")[0][: c.sentences])


def large_corpus(cfg) -> dict:
    """Stage 9: a synthetic corpus at WMT14 en-de's lengths, read by path (qkvmt.bench.large_corpus)."""
    c = cfg.corpus
    log.info(
        "stage 9/10, a synthetic corpus of %s pairs: the tokenizer, encoding and caching, a resumed run's first batch",
        f"{c.pairs:,}",
    )
    return corpus_stage(c, cfg.seed)


def hooks(cfg, dm) -> dict:
    """Stage 10: the hooks API's goals, on the imported stage's Marian and the bundled model (qkvmt.bench.hooks)."""
    import qkvmt

    c = cfg.imported
    log.info(
        "stage 10/10, hooks: run_with_cache and hooked search on a Marian of d_model %d, %d+%d layers; "
        "patch_study of %d pairs on %s",
        c.d_model,
        c.layers,
        c.layers,
        cfg.hooks.pairs,
        cfg.hooks.ckpt_path,
    )
    with marian_of(cfg, dm) as made:
        marian, bundled = qkvmt.load(made, device="cpu"), qkvmt.load(cfg.hooks.ckpt_path, device="cpu")
        return hooks_speed(cfg, marian, bundled, dm.read("val"), dm.src_lang)


def compiled_step(model, mode: str = "default", backend: str | Callable = "inductor"):
    """qkvmt.training.compiled of what a training step runs: ours' `loss` (the training loss), a
    peer's forward."""
    compile_ = functools.partial(compiled, mode=mode, backend=backend)
    if hasattr(model, "loss"):
        model.loss = compile_(model.loss)
        return model
    return compile_(model)
