"""What every scripts/*.py shares: the Hydra main around a pipeline function, free text on the
command line, and train.py's choice of recipe."""

import os
import re
import sys
from pathlib import Path

import hydra

from qkvmt.errors import report_user_errors

TEXT_KEYS = ("sentence", "reference")


def quote_text_overrides(argv: list[str], keys=TEXT_KEYS) -> list[str]:
    """Quote free-text overrides (sentence=..., reference=...) for Hydra's grammar.

    The shell removes the user's quotes, and Hydra would read `sentence=Ein Mann, der lacht` as
    a list, reject letters like "ä" outside quotes, and resolve `${...}`. The value is always
    taken as literal text.
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in keys:
            # Inside Hydra's quotes a backslash escapes only a quote (or the closing quote), so
            # only backslash runs before a quote or at the end are doubled.
            escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
            escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped).replace("${", "\\${")
            arg = f"{key}='{escaped}'"
        out.append(arg)
    return out


CPU_EXPERIMENT = "multi30k_de_en_cpu"


def with_default_experiment(argv: list[str], has_gpu: bool) -> list[str]:
    """train.py's default experiment is the GPU recipe; without a GPU, and when the command
    line names no experiment, the CPU recipe runs instead, and says so."""
    if has_gpu or any(a.lstrip("+").startswith("experiment=") for a in argv[1:]):
        return argv
    if os.environ.get("LOCAL_RANK", "0") == "0":  # a DDP worker re-runs this command line
        print(
            f"no GPU found: running experiment={CPU_EXPERIMENT}, the CPU recipe (experiment=NAME chooses another)",
            file=sys.stderr,
        )
    return [*argv, f"experiment={CPU_EXPERIMENT}"]


def hydra_command(function, config_name: str, script: str, text: tuple[str, ...] = (), argv=None):
    """The main of a script: `function(cfg)` with conf/<config_name>.yaml beside the script's
    folder and any override, under `@hydra.main`; a user error is one line, no traceback.

    text: the settings that take free text, quoted for Hydra (quote_text_overrides).
    argv: changes the command line first (train.py's default experiment).
    Hydra names the job after the function's module (qkvmt.pipeline.train -> train, whose log
    is train.log), which unwraps the decorators down to `function`.
    """
    conf = str(Path(script).resolve().parent.parent / "conf")
    main = hydra.main(config_path=conf, config_name=config_name, version_base="1.3")(report_user_errors(function))

    def run(cfg=None):
        if cfg is not None:  # as Hydra's own main: a given config passes straight through
            return main(cfg)
        sys.argv = quote_text_overrides(sys.argv, text)
        if argv is not None:
            sys.argv = argv(sys.argv)
        return main()

    return run
