"""What keys and values are for, measured on a corpus: the swap study,
the patch study or both (`Model.study`, `qkvmt intervene study=swap|patch|both`)."""

import sys
import time
from collections.abc import Callable
from dataclasses import asdict

import torch

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.host.machine import recorded_with
from qkvmt.studies.checks import checked_study
from qkvmt.studies.kv.passes import batches, study_sentences
from qkvmt.studies.kv.patch import patch_study
from qkvmt.studies.kv.result import KeyValueStudy
from qkvmt.studies.kv.swap import swap_study
from qkvmt.studies.model_protocol import ModelLike, identity


def progress(start: float) -> Callable[[str], None]:
    def say(what: str) -> None:
        print(f"  {what} ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)

    return say


def measured(
    model: ModelLike, lines: list[str], studies: tuple[str, ...], n: int, substitutes: int, decode: DecodeConfig
) -> tuple[dict, list, dict]:
    """(result, per-sentence details, seconds by phase) of the studies on the first n usable lines."""
    seconds, start = {}, time.perf_counter()
    say = progress(start)
    sentences, skipped = study_sentences(model, lines, n, decode)
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
            found = patch_study(model, sentences, lines, decode, substitutes, say)
        details[name] = {d.pop("line"): d for d in found.pop("sentences")}
        result[name] = found
        seconds[name] = time.perf_counter() - begin
    per_sentence = [
        {"line": s.line, "source": s.source, "translation": s.translation}
        | {name: details[name].get(s.line) for name in studies}
        for s in sentences
    ]
    return result, per_sentence, seconds


def kv_study(
    model: ModelLike,
    lines: list[str],
    study: str = "both",
    n: int = 300,
    substitutes: int = 5,
    name: str = "sentences",
    **decode,
) -> KeyValueStudy:
    """The studies `study` names (swap, patch or both) on the first n usable `lines` (named
    `name`); `substitutes`: the candidate words tried per sentence for the patch study's donor."""
    start = time.time()
    studies = checked_study(study, n, substitutes)
    with torch.no_grad(), model.fabric.autocast():
        found, per_sentence, seconds = measured(model, lines, studies, n, substitutes, model.decoding(**decode))
    result = {
        **identity(model),
        "split": name,
        "study": study,
        "substitutes": substitutes,
        **found,
        **recorded_with(),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.time() - start, 1),
    }
    return KeyValueStudy(result, per_sentence)
