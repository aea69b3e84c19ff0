"""The `qkvmt` subcommands, as data: each one's name, pipeline function (named as text, imported
only when it runs), config, summary and example. The table is a module of its own, below the
command that runs it (qkvmt.cli.main), because the record reads it too: qkvmt.results.markdown
writes a recorded `python scripts/<config>.py` as the subcommand it is the alias of, for the
record's tables and the studies' own, which sit below the command and the pipeline functions it runs."""

from collections.abc import Callable
from dataclasses import dataclass

from qkvmt.cli.hydra_main import TEXT_KEYS, with_default_experiment


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
            "serve",
            "qkvmt.pipeline.serve:serve",
            "serve",
            "a JSON translation server that batches concurrent requests",
            "ckpt_path=multi30k-de-en port=8000",
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
            "qkvmt.pipeline.intervene:intervene_command",
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
            "sinks",
            "qkvmt.pipeline.sinks:sinks",
            "sinks",
            "cross-attention's share on </s> and punctuation, forced on references and over its own translations",
            "ckpt_path=multi30k-de-en split=test",
        ),
        Command(
            "patch",
            "qkvmt.pipeline.patch:patch",
            "patch",
            "causal tracing: what patching each head and position from a clean source into a corrupt one restores",
            "ckpt_path=multi30k-de-en clean_file=clean.de corrupt_file=corrupt.de names='decoder.*.cross.v'",
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
            text=("hardware", "conditions", "of"),
        ),
    )
}
