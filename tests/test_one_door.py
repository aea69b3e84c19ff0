"""qkvmt.Model is the one door: every command that translates or analyses a model does it through
methods of qkvmt.Model, so a notebook reaches every feature a command has. A new command is
mapped here to the Model methods it calls, or exempt with the reason it needs none."""

import ast
import inspect
from pathlib import Path

from qkvmt.api import Model
from qkvmt.cli.main import COMMANDS

# Each command about a model -> the Model methods it calls.
DOOR = {
    "evaluate": ("evaluate",),
    "translate": ("translate",),
    "serve": ("translate",),
    "explore": ("attention", "align", "inspect", "intervene", "lens"),
    "align": ("align", "align_both", "align_corpus", "aer"),
    "inspect": ("inspect",),
    "intervene": ("intervene", "study", "lens_study"),
    "heads": ("heads",),
    "faithfulness": ("faithfulness",),
    "sinks": ("sinks",),
    "patch": ("patch_study",),
}
EXEMPT = {
    "train": "makes a model from data: there is no model to ask yet",
    "export": "converts a checkpoint's files to another format, running no model",
    "average": "averages checkpoint files into one, running no model",
    "benchmark": "times the training and decoding code against its peers, on models it builds",
    "bundle": "copies a finished run's files into a model folder",
    "figures": "draws the docs' figures from what the methods of DOOR return",
    "results": "writes the record of runs (docs/runs.json) as tables",
}
# The explorer keeps each sentence's forced pass and answers every panel from it, by the functions
# the methods call (qkvmt.explore.session), so its calls are not the methods' own.
SERVES_FROM_ONE_PASS = {"explore"}
# What a command may import below the Model: the typed edits it parses from the command line, and
# the checks the Model's methods run on their arguments, which a command runs before the slow load.
SETTINGS_BELOW = ("qkvmt.analysis.edits", "qkvmt.studies.checks")
SRC = Path(__file__).resolve().parents[1] / "src"


def tree(module: str) -> ast.Module:
    return ast.parse((SRC / module.replace(".", "/")).with_suffix(".py").read_text(encoding="utf-8"))


def imports(module: str) -> set[str]:
    return {n.module for n in ast.walk(tree(module)) if isinstance(n, ast.ImportFrom) and n.module}


def pipeline_modules(command: str) -> list[str]:
    """The command's pipeline module, and the pipeline modules of its own that it imports."""
    main = COMMANDS[command].function.partition(":")[0]
    shared = ("qkvmt.pipeline.inference_setup", "qkvmt.pipeline.evaluate")  # what every command reads its inputs with
    return [main] + sorted(m for m in imports(main) if m.startswith("qkvmt.pipeline.") and m not in shared)


def test_every_command_is_mapped_to_model_methods_or_exempt_with_a_reason():
    assert not set(DOOR) & set(EXEMPT)
    unplaced = sorted(set(COMMANDS) - set(DOOR) - set(EXEMPT))
    assert not unplaced, f"name the Model methods of {unplaced} in DOOR, or why they need none in EXEMPT"
    assert set(DOOR) | set(EXEMPT) == set(COMMANDS), "DOOR or EXEMPT names a command that is gone"
    assert all(reason.strip() for reason in EXEMPT.values())


def test_every_mapped_method_is_a_method_of_model_that_says_what_it_returns():
    for command, methods in DOOR.items():
        for name in methods:
            method = getattr(Model, name, None)
            assert callable(method) and not name.startswith("_"), f"qkvmt {command}: Model has no method {name}"
            returns = inspect.signature(method).return_annotation
            assert returns is not inspect.Signature.empty, f"Model.{name} does not say what it returns"


def test_each_command_calls_the_methods_it_is_mapped_to():
    for command, methods in DOOR.items():
        if command in SERVES_FROM_ONE_PASS:
            continue
        modules = pipeline_modules(command)
        called = {
            n.func.attr
            for m in modules
            for n in ast.walk(tree(m))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        missing = [m for m in methods if m not in called]
        assert not missing, f"qkvmt {command} ({', '.join(modules)}) calls no Model.{', Model.'.join(missing)}"


def test_no_command_reaches_below_the_model_for_its_work():
    below = ("qkvmt.analysis", "qkvmt.studies.", "qkvmt.alignment.leaderboard", "qkvmt.alignment.corpus")
    for command in set(DOOR) - SERVES_FROM_ONE_PASS:
        for module in pipeline_modules(command):
            reached = sorted(m for m in imports(module) if m.startswith(below) and m not in SETTINGS_BELOW)
            assert not reached, f"qkvmt {command}: {module} does the Model's work itself, with {reached}"
