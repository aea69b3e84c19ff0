"""The benchmark's hooks stage (`stages=[hooks]`): the goals of the hooks API (qkvmt.analysis.hooking)
measured, each figure beside its goal, with the machine it ran on (recorded_with):

1. `Model.run_with_cache` of every name for one validation sentence of about `hooks.words` words, over
   its reference, on the imported stage's Marian of OPUS-MT-base's shape (qkvmt.bench.imported, random
   weights): the median seconds of `hooks.repeats` calls (goal: at most 1 s on 2 CPU cores);
2. beam search of `hooks.sentences` validation sentences on that model with a hook that returns None on
   every decoder layer, against none, the three taking turns: at the feed-forward's output
   (`decoder.*.ffn.out`, a fused path's site, every layer at every step: what the engine itself costs)
   and at cross-attention's values (`decoder.*.cross.v`, a site of the explicit path: its layers leave
   the fused kernel); each as the median of each turn's ratio to the unhooked search (goal: at most 1.3x);
3. `Model.patch_study` of the bundled `hooks.ckpt_path` over every cross-attention head and source
   position (`decoder.*.cross.v`), on the first `hooks.pairs` pairs of as many tokens made of the
   validation sources by putting "Frau" for "Mann" (SWAP): its seconds, translations included (goal:
   at most 5 minutes on 2 CPU cores);
4. real patching's seconds over attribution patching's on the same pairs (goal: at least 20x), and the
   correlation of the two over every slice (no goal).

The pairs come from the benchmark's data alone: where its sources are not the model's source language
or no sentence holds the word, figures 3 and 4 are left out, and the result says why.
"""

import logging
import statistics
import time

import torch

from qkvmt.bench.analysis import nearest
from qkvmt.bench.timing import ratio, seconds_in_turns
from qkvmt.host.machine import recorded_with
from qkvmt.studies.patching.pairs import aligned, swapped_word_pairs

log = logging.getLogger(__name__)
# The corrupt sources: "Mann" made "Frau", with the article just before it agreeing.
SWAP = {"Mann": "Frau"}
ARTICLES = {"Ein": "Eine", "ein": "eine", "Der": "Die", "der": "die", "einem": "einer", "den": "die", "dem": "der"}
PATCHED = "decoder.*.cross.v"
HOOKED = ("decoder.*.ffn.out", "decoder.*.cross.v")  # where the search's hook is: a fused path's site, an explicit one
GOALS = {"cache_s": 1.0, "hooked_vs_plain": 1.3, "patch_s": 300.0, "patching_vs_attribution": 20.0}


def hooks_speed(cfg, imported, patched, val: tuple[list[str], list[str]], src_lang: str) -> dict:
    """Every figure of the stage (see the module's docstring): `imported` the Marian-shaped Model,
    `patched` the bundled one, `val` the validation pairs of the benchmark's data in `src_lang`."""
    c = cfg.hooks
    out = {"goals": GOALS, **recorded_with()}
    out["cache"] = cache_speed(imported, val, c.words, c.repeats)
    out["search"] = search_speed(imported, val[0][: c.sentences], c.repeats)
    out["patch"] = patch_speed(patched, val[0], src_lang, c.pairs)
    return out


def cache_speed(model, val: tuple[list[str], list[str]], words: int, repeats: int) -> dict:
    """run_with_cache of every name for the validation sentence nearest `words` words, over its reference."""
    source = nearest(val[0], words, 1)[0]
    target = val[1][val[0].index(source)]
    seconds = []
    for _ in range(repeats + 1):  # the first warms up
        start = time.perf_counter()
        cache = model.run_with_cache(source, target)
        seconds.append(time.perf_counter() - start)
    return {
        "words": len(source.split()),
        "names": len(model.hook_names()),
        "kept": len(cache.activations),
        "seconds": statistics.median(seconds[1:]),
    }


def search_speed(model, sources: list[str], repeats: int) -> dict:
    """Beam search of `sources` with a hook returning None at each site of HOOKED, and with none."""

    def none(activation, ctx):
        return None

    calls = {"plain": lambda: model.translate(sources)}
    calls |= {name: lambda name=name: model.translate(sources, hooks={name: none}) for name in HOOKED}
    turns = seconds_in_turns(calls, torch.device("cpu"), repeats)
    plain = turns["plain"]

    def hooked(name: str) -> dict:
        # the median of each turn's ratio: a neighbour's load, which moves a call's time by several times
        # on a shared machine, touches the two calls of one turn alike
        vs_plain = statistics.median(h / p for h, p in zip(turns[name], plain))
        return {"seconds": statistics.median(turns[name]), "vs_plain": vs_plain}

    return {
        "sentences": len(sources),
        "beam_size": model.decoding().beam_size,
        "plain_s": statistics.median(plain),
        "hooked": {name: hooked(name) for name in HOOKED},
    }


def patch_speed(model, sources: list[str], src_lang: str, n: int) -> dict:
    """patch_study of the first n pairs of as many tokens made of `sources`, or why there is none."""
    if src_lang != model.meta.src_lang:
        return {"skipped": f"the data's sources are {src_lang}, {model.meta.src_lang} is what the model reads"}
    clean, corrupt = swapped_word_pairs(sources, SWAP, ARTICLES)
    kept, _ = aligned(model.tokenizer, clean, corrupt, "skip")
    if not kept:
        return {"skipped": f"no validation source holds {', '.join(SWAP)} with as many tokens once swapped"}
    clean, corrupt = [k[1] for k in kept[:n]], [k[2] for k in kept[:n]]
    log.info("  patch_study of %d pairs, %s", len(clean), PATCHED)
    study = model.patch_study(clean, corrupt, names=PATCHED).result
    seconds = study["seconds"]
    return {
        "given": len(clean),
        "pairs": study["n"],
        "passes": study["patched_passes"],
        "seconds": seconds,
        "patching_vs_attribution": ratio(seconds["patching"], seconds["attribution"]),  # None: too fast to time
        "correlation": study["correlation"],
    }
