"""study(cfg): what keys and values are for, measured on a split (qkvmt.analysis.kv_study): the
swap study, the patch study or both, written as study.json, study.md and sentences.jsonl."""

import datetime
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from omegaconf import DictConfig

from qkvmt.analysis.kv_study.passes import batches, study_sentences
from qkvmt.analysis.kv_study.patch import patch_study
from qkvmt.analysis.kv_study.swap import swap_study
from qkvmt.bundled import bundled_name
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.results import this_machine
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, decode_overrides, load_for_inference
from qkvmt.text.sources import read_lines
from qkvmt.views.kv_study import markdown

STUDIES = {"swap": ("swap",), "patch": ("patch",), "both": ("swap", "patch")}


def settings(cfg: DictConfig) -> tuple[str, ...]:
    """The studies asked for; every bad setting is a UserError, before any work."""
    if cfg.study not in STUDIES:
        raise UserError(f"study={cfg.study!r}: use one of {', '.join(STUDIES)}")
    for key in ("n", "substitutes"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
            raise UserError(f"{key}={cfg[key]!r}: give a whole number, 1 or more")
    return STUDIES[cfg.study]


def sources(cfg: DictConfig, model) -> tuple[list[str], str]:
    """The source lines and a short name for them: src_file alone, or what read_inputs reads."""
    if cfg.src_file and not cfg.ref_file:
        return read_lines(Path(cfg.src_file)), Path(cfg.src_file).name.removesuffix(".gz")
    src, _, name = read_inputs(cfg, model.meta, model.paths[0])
    return src, name


def progress(start: float):
    def say(what: str) -> None:
        print(f"  {what} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)

    return say


def measured(cfg: DictConfig, model, lines: list[str], studies: tuple[str, ...]) -> tuple[dict, list, dict]:
    """(result, per-sentence details, seconds by phase) of the studies on the first cfg.n usable lines."""
    decode = model.decoding(**decode_overrides(cfg.decode))
    seconds, start = {}, time.perf_counter()
    say = progress(start)
    sentences, skipped = study_sentences(model, lines, cfg.n, decode)
    if not sentences:
        raise UserError("no sentence of the split has two translated words to study: give more sentences (n=)")
    seconds["translate and align"] = time.perf_counter() - start
    say(f"{len(sentences)} sentences translated and aligned")
    result = {"n": len(sentences), "skipped": dict(skipped), "decoding": asdict(decode)}
    details = {}
    for name in studies:
        begin = time.perf_counter()
        if name == "swap":
            found = swap_study(model, sentences, batches(model, sentences, decode.max_tokens), decode, say)
        else:
            found = patch_study(model, sentences, lines, decode, cfg.substitutes, say)
        details[name] = {d.pop("line"): d for d in found.pop("sentences")}
        result[name] = found
        seconds[name] = time.perf_counter() - begin
    per_sentence = [
        {"line": s.line, "source": s.source, "translation": s.translation}
        | {name: details[name].get(s.line) for name in studies}
        for s in sentences
    ]
    return result, per_sentence, seconds


def study(cfg: DictConfig) -> dict:
    start = time.time()
    studies = settings(cfg)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    lines, name = sources(cfg, model)
    with torch.no_grad(), model.fabric.autocast():
        found, per_sentence, seconds = measured(cfg, model, lines, studies)
    result = {
        "model": bundled_name(model.paths[0]) or str(model.paths[0]),
        "checkpoints": [str(p) for p in model.paths],
        "split": name,
        "study": cfg.study,
        "substitutes": cfg.substitutes,
        **found,
        "machine": this_machine(),  # what `qkvmt results add=<this folder>` records it with
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.time() - start, 1),
    }
    summary = markdown(result)
    staged = StagedOutput(cfg, model.paths, name, kind="kv_study")
    with staged as out:
        write_json(out / "study.json", result)
        write_text(out / "study.md", summary)
        write_text(out / "sentences.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in per_sentence))
    print(summary, end="")
    print(
        f"{result['n']} sentences in {result['wall_s']:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items())
        + f"); wrote {staged.final}"
    )
    return result | {"output_dir": str(staged.final)}
