"""The `qkvmt` command (and `python -m qkvmt`): one subcommand per pipeline function, each a Hydra
app over the configuration that ships inside the package (qkvmt/conf, shown in the repository as
conf/), taking `key=value` overrides, `--help`, `-m` and `--cfg job` as Hydra apps do.

    qkvmt                                   # the subcommands, one line each, with an example
    qkvmt train experiment=multi30k_de_en_cpu
    qkvmt translate ckpt_path=multi30k-de-en sentence='Ein Mann fährt Fahrrad .'

The subcommands are the table qkvmt.cli.table.COMMANDS; scripts/<name>.py in the repository are
aliases (`run(name)`). Nothing here imports torch or Lightning: a subcommand imports its pipeline
only when it runs, so `qkvmt --help` is quick.
"""

import importlib
import sys

from qkvmt.cli.hydra_main import hydra_command
from qkvmt.cli.table import COMMANDS


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
