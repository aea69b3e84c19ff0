"""The decoding stages of scripts/benchmark.py: beam-search speed of each system on the same
sentences (ours cached and uncached, HF generate, our model exported to CTranslate2), and ours'
time per generated token as outputs grow."""

import copy
import logging
import tempfile
from pathlib import Path

import torch

from qkvmt.bench.peers import NO_HF
from qkvmt.bench.profile import profile_steps
from qkvmt.bench.timing import ct2_fixed_length, hf_fixed_length, ours_fixed_length, ratio, time_call
from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import export_ctranslate2, require_ctranslate2
from qkvmt.files import write_text
from qkvmt.model.checkpoint import CheckpointMeta

log = logging.getLogger(__name__)


def decode_speed(cfg, models: dict, src: torch.Tensor, device, out_dir: Path) -> dict:
    """Beam-search sentences/s of ours (cached and uncached) and HF generate, each forced to
    decode.length tokens per sentence; with decode.profile_calls, where ours' time goes."""
    d = cfg.decode
    n = src.size(0)
    runs, profiled = {}, None
    if "ours" in models:
        ours = models["ours"].model
        log.info("  decoding: ours, cached and uncached (%d sentences, %d repeats)", n, d.repeats)
        cached = ours_fixed_length(ours, src, d.beam_size, d.length, True)
        runs["ours"] = time_call(cached, device, d.repeats)[0]
        runs["uncached"] = time_call(ours_fixed_length(ours, src, d.beam_size, d.length, False), device, d.repeats)[0]
        if d.profile_calls:
            log.info("  profile: ours, %d beam searches (decode_profile.txt)", d.profile_calls)
            profiled, text = profile_steps(lambda i: cached(), d.profile_calls, device.type == "cuda")
            write_text(out_dir / "decode_profile.txt", text)
    if "hf" in models:
        log.info("  decoding: hf generate")
        runs["hf"] = time_call(hf_fixed_length(models["hf"], src, d.beam_size, d.length), device, d.repeats)[0]
    out = {"sentences": n, "beam_size": d.beam_size, "output_tokens": d.length, "seconds": runs, "profile": profiled}
    for name in ("ours", "uncached", "hf"):
        out[f"{name}_sent_s"] = n / runs[name] if name in runs else None
    out["ours_vs_hf"] = ratio(out["ours_sent_s"], out["hf_sent_s"])
    out["ours_vs_uncached"] = ratio(out["ours_sent_s"], out["uncached_sent_s"])
    if "hf" in cfg.systems and "hf" not in models:
        out["hf_missing"] = NO_HF
    return out


def decode_ctranslate2(cfg, ours, tokenizer, src: torch.Tensor, decoded: dict) -> dict:
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
            out[f"ours_vs_ct2_{compute_type}"] = ratio(decoded["ours_sent_s"], out[f"ct2_{compute_type}_sent_s"])
    return out


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
