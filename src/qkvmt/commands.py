"""The `qkvmt` command (and `python -m qkvmt`): one subcommand per pipeline function, each a Hydra
app over the configuration that ships inside the package (qkvmt/conf, shown in the repository as
conf/), taking `key=value` overrides, `--help`, `-m` and `--cfg job` as Hydra apps do.

    qkvmt                                   # the subcommands, one line each, with an example
    qkvmt train experiment=multi30k_de_en_cpu
    qkvmt translate ckpt_path=multi30k-de-en sentence='Ein Mann fährt Fahrrad .'

scripts/<name>.py in the repository are aliases (`run(name)`). Nothing here imports torch or
Lightning: a subcommand imports its pipeline only when it runs, so `qkvmt --help` is quick.
"""

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass

from qkvmt.cli import TEXT_KEYS, hydra_command, with_default_experiment


def default_experiment(argv: list[str]) -> list[str]:
    """train's command line with the CPU recipe where there is no GPU (torch imported only as train
    runs, so `qkvmt --help` stays quick)."""
    import torch

    return with_default_experiment(argv, torch.cuda.is_available())


@dataclass(frozen=True)
class Command:
    name: str  # qkvmt <name>
    function: str  # "module:function", the pipeline function that returns the metrics dict
    config: str  # conf/<config>.yaml
    summary: str  # one line for `qkvmt --help`
    example: str  # its overrides in a typical call
    text: tuple[str, ...] = ()  # settings that take free text
    before_torch: bool = False  # skip triton where no GPU runs it, before Lightning imports torch._dynamo
    argv: Callable[[list[str]], list[str]] | None = None  # changes the command line first


COMMANDS = {
    c.name: c
    for c in (
        Command(
            "train",
            "qkvmt.pipeline.train:train_command",
            "train",
            "train a model on a recipe (the CPU recipe where there is no GPU)",
            "experiment=multi30k_de_en_cpu",
            before_torch=True,
            argv=default_experiment,
        ),
        Command(
            "evaluate",
            "qkvmt.pipeline.evaluate:evaluate",
            "evaluate",
            "score a checkpoint on a test set: BLEU, chrF, attention maps, report.html",
            "ckpt_path=multi30k-de-en split=test",
        ),
        Command(
            "translate",
            "qkvmt.pipeline.translate:translate",
            "translate",
            "translate a sentence, or standard input line by line",
            "ckpt_path=multi30k-de-en sentence='Ein Mann fährt Fahrrad .'",
            text=TEXT_KEYS,
        ),
        Command(
            "explore",
            "qkvmt.pipeline.explore:explore",
            "explore",
            "the attention explorer in a browser",
            "ckpt_path=multi30k-de-en port=8000",
            text=TEXT_KEYS,
        ),
        Command(
            "align",
            "qkvmt.pipeline.align:align",
            "align",
            "word alignments from cross-attention, for a sentence, a corpus or against gold links (AER)",
            "ckpt_path=multi30k-de-en sentence='Ein Hund rennt .'",
            text=TEXT_KEYS,
        ),
        Command(
            "inspect",
            "qkvmt.pipeline.inspect_attention:inspect_attention",
            "inspect_attention",
            "one head's queries, keys, values, scores and weights",
            "ckpt_path=multi30k-de-en sentence='Ein Hund rennt .' kind=cross layer=-1 head=0",
            text=TEXT_KEYS,
        ),
        Command(
            "intervene",
            "qkvmt.pipeline.intervene:intervene",
            "intervene",
            "a sentence's translation with its attention's keys, values or heads edited",
            "ckpt_path=multi30k-de-en sentence='Ein Hund rennt über eine grüne Wiese .' "
            "'edits=[{swap: {a: 1, b: 6, what: keys}}]'",
            text=TEXT_KEYS,
        ),
        Command(
            "heads",
            "qkvmt.pipeline.heads:heads",
            "heads",
            "each head's effect on BLEU when masked, and which heads can go",
            "ckpt_path=multi30k-de-en split=val",
        ),
        Command(
            "faithfulness",
            "qkvmt.pipeline.faithfulness:faithfulness",
            "faithfulness",
            "which signal describes what the model computed (deletion, sufficiency)",
            "ckpt_path=multi30k-de-en n=100",
        ),
        Command(
            "export",
            "qkvmt.pipeline.export:export",
            "export",
            "a checkpoint as a CTranslate2, Hugging Face Marian or safetensors folder",
            "ckpt_path=<run>/checkpoints/best.ckpt format=ctranslate2",
        ),
        Command(
            "average",
            "qkvmt.pipeline.average:average",
            "average",
            "average a run's last checkpoints into one",
            "ckpt_path=<run>/checkpoints/last.ckpt average=last5",
        ),
        Command(
            "benchmark",
            "qkvmt.pipeline.benchmark:benchmark",
            "benchmark",
            "training and decoding speed against torch.nn.Transformer and Hugging Face",
            "model=small device=cpu",
            before_torch=True,
        ),
        Command(
            "bundle",
            "qkvmt.pipeline.bundle:bundle",
            "bundle",
            "store a finished run as a model folder that loads by name",
            "run_dir=<run> name=<name> commit=<sha>",
        ),
        Command(
            "figures",
            "qkvmt.pipeline.figures:figures",
            "figures",
            "draw the docs' attention figures and the explorer's screenshot",
            "output_dir=figures",
            text=(*TEXT_KEYS, "explorer.sentence"),
        ),
        Command(
            "results",
            "qkvmt.pipeline.results:results",
            "results",
            "the results tables from the record of runs (docs/runs.json)",
            "check=true",
            text=("hardware", "conditions"),
        ),
    )
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: qkvmt SUBCOMMAND [key=value ...] [--help | --cfg job | -m]", "", "subcommands:"]
    lines += [f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS.values()]
    lines += ["", "examples:"]
    lines += [f"  qkvmt {c.name} {c.example}" for c in COMMANDS.values()]
    lines += ["", "`qkvmt SUBCOMMAND --help` lists a subcommand's settings; python -m qkvmt is the same command."]
    return "\n".join(lines)


def load(name: str):
    """The pipeline function of subcommand `name`, imported as the subcommand runs it: where it
    trains, triton is skipped first, before Lightning imports torch._dynamo."""
    command = COMMANDS[name]
    if command.before_torch:
        from qkvmt.training.torch_build import skip_idle_triton

        skip_idle_triton()  # 78 MB a process without a GPU, for a module it cannot use
    module, _, attr = command.function.partition(":")
    return getattr(importlib.import_module(module), attr)


def app(name: str, subcommand_in_argv: bool = False):
    """Subcommand `name` as a Hydra main: called with no argument it reads this process's command
    line (sys.argv[1:] its overrides, after the subcommand's own name where `subcommand_in_argv`);
    called with a config, it runs on that config and returns the function's value, as a sweeper's
    job does."""
    command = COMMANDS[name]
    return hydra_command(
        load(name),
        command.config,
        text=command.text,
        argv=command.argv,
        subcommand=name if subcommand_in_argv else None,
    )


def run(name: str, subcommand_in_argv: bool = False) -> None:
    """Run subcommand `name` on this process's command line (scripts/<name>.py call this)."""
    app(name, subcommand_in_argv)()


def main(argv: list[str] | None = None) -> None:
    """qkvmt SUBCOMMAND [overrides]; alone, or with -h/--help, the list of subcommands."""
    args = sys.argv[1:] if argv is None else argv
    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return
    if args[0] in ("-V", "--version"):
        from qkvmt import __version__

        print(f"qkvmt {__version__}")
        return
    if args[0] not in COMMANDS:
        print(
            f"error: qkvmt has no subcommand {args[0]!r}: use one of {', '.join(COMMANDS)} (qkvmt --help shows them)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    run(args[0], subcommand_in_argv=True)
