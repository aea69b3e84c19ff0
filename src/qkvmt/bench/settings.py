"""The benchmark's own settings (conf/benchmark.yaml: `systems` and a section per stage), checked
before any stage runs or any model loads.

The stages hand these values on to code that would report them late (after minutes of other
stages), under its own names (`serve.per_request` is the server's `limits.sentences`,
`corpus.vocab_size` a DataModule's `data.vocab_size`), or not at all (Python's slicing takes
`serve.sentences=-5`, a lognormal takes `corpus.mean_words=-1`). So each value is checked here
against what its stage can use, and a mistake is one line naming the setting as the user gave it:
a value of the wrong type or range, a key no stage reads (`+serve.foo=1`), or two settings that
together make a figure meaningless.
"""

import math
from collections.abc import Callable
from pathlib import Path

from omegaconf import OmegaConf

from qkvmt.bundled import bundled_names, names_nothing
from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import QUANTIZATIONS
from qkvmt.model.kernels import SDPA_BACKENDS
from qkvmt.serve.batcher import batching_of
from qkvmt.setting_types import as_typed, is_whole
from qkvmt.text.tokenizer import SPECIALS

SYSTEMS = ("ours", "ours_align", "torch", "hf")
# The packaged configuration (qkvmt.cli.CONF_DIR, a layer above this one): the recipes memory.experiment names.
EXPERIMENTS = Path(__file__).resolve().parents[1] / "conf" / "experiment"

Check = Callable[[object], str | None]  # what to give instead of a value, or None if it will do


def whole(least: int, what: str, example: int | None = None) -> Check:
    def check(value):
        if not is_whole(value, least):
            return f"give {what}, a whole number of at least {least}" + (f", e.g. {example}" if example else "")

    return check


def wholes(least: int, what: str) -> Check:
    def check(value):
        if not OmegaConf.is_list(value) or not all(is_whole(v, least) for v in value):
            return f"give a list of {what}, whole numbers of at least {least} ([] for none)"

    return check


def is_positive(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def above_zero(what: str, example: float) -> Check:
    def check(value):
        if not is_positive(value):
            return f"give {what}, a number above 0, e.g. {example:g}"

    return check


def flag(value):
    if not isinstance(value, bool):
        return "give true or false"


def texts(value):
    if not OmegaConf.is_list(value) or not all(isinstance(v, str) for v in value):
        return "give a list of qkvmt train overrides, e.g. '[\"trainer.precision=32-true\"]' ([] for none)"


def ct2_types(value):
    if value is not None and (not OmegaConf.is_list(value) or any(v not in QUANTIZATIONS for v in value)):
        return f"give a list of CTranslate2 compute types among {', '.join(QUANTIZATIONS)} ([] to skip)"


def name_or_null(value):
    if value is not None and (not isinstance(value, str) or not value):
        return "give a recipe's name (conf/experiment), or null to skip"


def model_path(value):
    if not isinstance(value, str) or not value:
        return f"give a trained model: a checkpoint, a run's folder or a bundled model ({', '.join(bundled_names())})"


def word_range(value):
    if not OmegaConf.is_list(value) or len(value) != 2 or not all(is_whole(v, 1) for v in value) or value[0] > value[1]:
        return "give the fewest and the most words of a sentence, e.g. [18,22]"


# Every key of each section, as conf/benchmark.yaml has it, and what it takes. A forced length is
# EOS and at least one token before it.
SECTIONS: dict[str, dict[str, Check]] = {
    "train": {
        "warmup_steps": whole(0, "the untimed steps of each system"),
        "steps": whole(1, "the timed steps of each system"),
        "rounds": whole(1, "the turns the systems take"),
        "profile_steps": whole(0, "the number of steps to profile (0 to skip)"),
    },
    "decode": {
        "sentences": whole(1, "the validation sentences to decode"),
        "beam_size": whole(1, "the beams of each search"),
        "length": whole(2, "the tokens each sentence decodes, EOS included"),
        "repeats": whole(1, "the timed calls of each system"),
        "ctranslate2": ct2_types,
        "profile_calls": whole(0, "the number of beam searches to profile (0 to skip)"),
    },
    "scaling": {
        "sentences": whole(1, "the sentences of each call"),
        "lengths": wholes(2, "output lengths, EOS included"),
        "uncached": flag,
        "corpus_pairs": wholes(1, "corpus sizes in pairs"),
    },
    "analysis": {"sentences": whole(0, "the validation pairs to analyse (0 to skip)")},
    "memory": {
        "experiment": name_or_null,
        "steps": whole(1, "the training steps to run"),
        "every": whole(1, "the steps between readings of memory"),
        "overrides": texts,
    },
    "imported": {
        **{key: whole(1, f"the model's {key}") for key in ("d_model", "layers", "heads", "ffn_dim", "vocab_size")},
        "spm_vocab": whole(1, "the pieces of each SentencePiece model"),
        "spm_lines": whole(1, "the training lines each SentencePiece model learns from"),
        "max_length": whole(2, "the most tokens of an output, </s> included"),
        "sentences": whole(1, "the validation sentences to decode"),
        "repeats": whole(1, "the timed calls of each"),
        "explorer_sentences": whole(1, "the sentences the explorer opens"),
        "explorer_words": word_range,
    },
    "serve": {
        "ckpt_path": model_path,
        "sentences": whole(1, "the validation sentences sent each run"),
        "clients": whole(1, "the concurrent clients"),
        "per_request": whole(1, "the sentences of each request"),
        "beam_size": whole(1, "the beams of each search"),
        "repeats": whole(1, "the timed runs of each"),
        "batching": lambda value: None,  # the server's own settings, checked as qkvmt serve checks them
    },
    "hooks": {
        "words": whole(1, "the words of the sentence run_with_cache reads", 20),
        "repeats": whole(1, "the timed calls of each"),
        "sentences": whole(1, "the validation sentences each beam search decodes"),
        "pairs": whole(1, "the clean/corrupt pairs patch_study traces", 100),
        "ckpt_path": model_path,
    },
    "corpus": {
        "pairs": whole(1, "the sentence pairs to make", 5000000),
        "mean_words": above_zero("the mean words of a sentence", 25),
        "max_words": whole(1, "the most words of a sentence", 250),
        "vocab": whole(1, "the distinct words of each language", 50000),
        "vocab_size": whole(len(SPECIALS) + 1, "the BPE's vocabulary size", 37000),
        "tokenizer_sample": whole(1, "the most pairs the tokenizer learns from"),
        "max_tokens": whole(1, "the first training batch's token budget", 25000),
    },
}


def systems(value):
    if not OmegaConf.is_list(value) or not value or any(s not in SYSTEMS for s in value):
        return f"give some of {', '.join(SYSTEMS)}, e.g. '[ours,torch]'"


def peak(value):
    if value is not None and not is_positive(value):
        return "give the device's bf16 peak in TFLOP/s, a number above 0, e.g. 989, or null to look it up"


def sdpa_backend(value):
    if value is not None and value != "auto" and value not in SDPA_BACKENDS:
        return f"give auto, null or one of {', '.join(SDPA_BACKENDS)}"


# The top-level settings that only the stages read (device, precision, compile_mode and model.* are
# checked by qkvmt.pipeline.benchmark).
TOP: dict[str, Check] = {
    "systems": systems,
    "compile": flag,
    "sdpa_backend": sdpa_backend,
    "peak_tflops": peak,
    "seed": whole(0, "the seed of every system's weights and batches", 1234),
}


def check_settings(cfg) -> None:
    """A UserError for the first of the benchmark's own settings that its stage cannot use."""
    for key, check in TOP.items():
        problem = check(cfg[key])
        if problem:
            raise UserError(f"{key}={as_typed(cfg[key])}: {problem}")
    # Every section, whichever stages run: a value out of range is a mistake wherever it is.
    for section, keys in SECTIONS.items():
        given = cfg.get(section)
        if not OmegaConf.is_dict(given):
            raise UserError(f"{section}={as_typed(given)}: {section}.* are settings, not a value (docs/benchmark.md)")
        unknown = [key for key in given if key not in keys]
        if unknown:
            raise UserError(
                f"{section}.{unknown[0]}: no such setting of the benchmark; the settings under {section} are "
                f"{', '.join(keys)} (docs/benchmark.md)"
            )
        for key, check in keys.items():
            if key not in given:  # ~serve.repeats: dropped from the configuration
                raise UserError(f"{section}.{key} is missing: give {section}.{key}= (docs/benchmark.md)")
            problem = check(given[key])
            if problem:
                raise UserError(f"{section}.{key}={as_typed(given[key])}: {problem}")
    batching_of(cfg.serve.batching, "serve.batching.")
    check_relations(cfg)
    check_sources(cfg)


def check_relations(cfg) -> None:
    """Settings that are each fine but together give a figure other than the one they name."""
    t, m, i, c = cfg.train, cfg.memory, cfg.imported, cfg.corpus
    if t.rounds > t.steps:  # each round times at least one step: more rounds would time more steps
        raise UserError(f"train.rounds={t.rounds} with train.steps={t.steps}: give at most as many rounds as steps")
    if m.every > m.steps:  # no reading of memory after the first: no growth to measure
        raise UserError(f"memory.every={m.every} with memory.steps={m.steps}: give memory.every at most memory.steps")
    if i.d_model % i.heads:
        raise UserError(
            f"imported.d_model={i.d_model} with imported.heads={i.heads}: give a d_model that the heads divide evenly"
        )
    if c.max_words <= c.mean_words:  # lengths cut at the mean would have a mean well below it
        raise UserError(
            f"corpus.max_words={c.max_words} with corpus.mean_words={c.mean_words:g}: give corpus.max_words above "
            "corpus.mean_words (a long tail, 250 against 25 as WMT14 en-de's sentences)"
        )


def check_sources(cfg) -> None:
    """What a stage that runs reads from this machine: checked only for the stages that run, since
    another machine may lack what a stage not run would read."""
    for section in ("serve", "hooks"):
        given = cfg[section].ckpt_path
        if section in cfg.stages and names_nothing(given):
            raise UserError(
                f"{section}.ckpt_path={given}: no such file or folder, nor a bundled model "
                f"({', '.join(bundled_names())}): give a trained model"
            )
    experiment = cfg.memory.experiment
    if "memory" in cfg.stages and experiment is not None and not (EXPERIMENTS / f"{experiment}.yaml").is_file():
        recipes = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))
        raise UserError(f"memory.experiment={experiment}: no such recipe; use one of {', '.join(recipes)}, or null")
