"""The decoding stages of scripts/benchmark.py: beam-search speed of each system on the same
sentences (ours cached and uncached, HF generate, our model exported to CTranslate2), taking
turns call by call, and ours' time per generated token as outputs grow."""

import contextlib
import copy
import logging
import tempfile
from pathlib import Path

import torch

from qkvmt.bench.peers import NO_HF
from qkvmt.bench.profile import profile_steps
from qkvmt.bench.timing import ct2_fixed_length, hf_fixed_length, ours_fixed_length, ratio, time_call, time_in_turns
from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import export_ctranslate2, require_ctranslate2
from qkvmt.files import write_text
from qkvmt.hf.tokenizer_files import as_text
from qkvmt.model.checkpoint import CheckpointMeta

log = logging.getLogger(__name__)


def decode_speed(cfg, models: dict, tokenizer, src: torch.Tensor, device, out_dir: Path, files=None) -> dict:
    """Beam-search sentences/s of ours (cached and uncached), HF generate and each CTranslate2
    compute type in decode.ctranslate2, each forced to decode.length tokens per sentence, the
    systems taking turns; with decode.profile_calls, where ours' time goes. files: the tokenizer's
    files where it is SentencePiece's (the DataModule's tokenizer_files), kept with the export."""
    d = cfg.decode
    n = src.size(0)
    runs, profiled = {}, None
    engines = {}
    if "ours" in models:
        ours = models["ours"].model
        runs["ours"] = ours_fixed_length(ours, src, d.beam_size, d.length, True)
        runs["uncached"] = ours_fixed_length(ours, src, d.beam_size, d.length, False)
        engines = engine_runs(ours, src, d)
        runs |= {name: fn for name, fn in engines.items() if callable(fn)}
    if "hf" in models:
        runs["hf"] = hf_fixed_length(models["hf"], src, d.beam_size, d.length)
    with ctranslate2_runs(cfg, models.get("ours"), tokenizer, src, files) as (ct2_runs, ct2_info):
        runs |= ct2_runs
        log.info("  decoding: %s, taking turns (%d sentences, %d repeats)", ", ".join(runs), n, d.repeats)
        seconds = time_in_turns(runs, device, d.repeats)
    if "ours" in runs and d.profile_calls:
        log.info("  profile: ours, %d beam searches (decode_profile.txt)", d.profile_calls)
        profiled, text = profile_steps(lambda i: runs["ours"](), d.profile_calls, device.type == "cuda")
        write_text(out_dir / "decode_profile.txt", text)
    out = {"sentences": n, "beam_size": d.beam_size, "output_tokens": d.length, "seconds": seconds, "profile": profiled}
    for name in ("ours", "uncached", "hf", *ENGINES, *ct2_runs):
        out[f"{name}_sent_s"] = n / seconds[name] if name in seconds else None
    out["engines_missing"] = {name: why for name, why in engines.items() if isinstance(why, str)}
    for name in ENGINES:
        out[f"{name}_vs_ours"] = ratio(out[f"{name}_sent_s"], out["ours_sent_s"])
    out["ours_vs_hf"] = ratio(out["ours_sent_s"], out["hf_sent_s"])
    out["ours_vs_uncached"] = ratio(out["ours_sent_s"], out["uncached_sent_s"])
    for name in ct2_runs:
        out[f"ours_vs_{name}"] = ratio(out["ours_sent_s"], out[f"{name}_sent_s"])
        out[f"best_vs_{name}"] = ratio(max(out[f"{x}_sent_s"] or 0 for x in ("ours", *ENGINES)), out[f"{name}_sent_s"])
    if "hf" in cfg.systems and "hf" not in models:
        out["hf_missing"] = NO_HF
    return out | ct2_info


# Our search on its other engines, beside the eager float32 one ("ours"): decode.compile and decode.compute_type.
ENGINES = {
    "ours_compiled": {"compile": "true"},
    "ours_bfloat16": {"compute_type": "bfloat16"},
    "ours_int8": {"compute_type": "int8"},
}


def engine_runs(model, src: torch.Tensor, d) -> dict:
    """Each of ENGINES' searches as ours_fixed_length makes it, or why it cannot run here (its one-line
    error: no compiler, no native bf16, no int8 kernels)."""
    out = {}
    for name, engine in ENGINES.items():
        fn = ours_fixed_length(model, src[:1], d.beam_size, 2, True, **engine)
        try:
            fn()  # the settings' checks, on one sentence (a compiled step is traced in the first turn)
        except UserError as e:
            out[name] = str(e)
            continue
        out[name] = ours_fixed_length(model, src, d.beam_size, d.length, True, **engine)
    return out


@contextlib.contextmanager
def ctranslate2_runs(cfg, ours, tokenizer, src: torch.Tensor, files=None):
    """Our trained weights exported to CTranslate2, one run of the same sentences with the same
    beam and forced length on the same device for each type in decode.ctranslate2 (named
    ct2_<type>), while the exported folder lasts; and what the results say of CTranslate2."""
    types = list(cfg.decode.ctranslate2 or [])
    if ours is None or not types:
        yield {}, {}
        return
    try:
        ctranslate2 = require_ctranslate2()
    except UserError as e:
        yield {}, {"ctranslate2_missing": str(e)}
        return
    d, c = cfg.decode, ours.model.cfg
    device = "cuda" if src.is_cuda else "cpu"
    sources = [[tokenizer.id_to_token(i) for i in row if i not in (c.pad_id, c.eos_id)] for row in src.tolist()]
    with tempfile.TemporaryDirectory() as folder:
        text = {"tokenizer": "", "tokenizer_files": as_text(files)} if files else {"tokenizer": tokenizer.to_str()}
        meta = CheckpointMeta(model_config=c.to_dict(), src_lang="", tgt_lang="", **text)
        export_ctranslate2(copy.deepcopy(ours.model).float().cpu(), tokenizer, meta, Path(folder))
        runs = {}
        for compute_type in types:
            translator = ctranslate2.Translator(
                folder, device=device, compute_type=compute_type, intra_threads=torch.get_num_threads()
            )
            runs["ct2_" + compute_type] = ct2_fixed_length(translator, sources, d.beam_size, d.length)
        yield runs, {"ctranslate2_version": ctranslate2.__version__}


def decode_scaling(cfg, ours, src: torch.Tensor, device) -> list[dict]:
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
