"""What every subcommand shares (qkvmt.cli.main): the Hydra main around a pipeline function over
the packaged configuration, free text on the command line, and train's choice of recipe."""

import contextlib
import functools
import os
import re
import sys
from pathlib import Path

from omegaconf import OmegaConf

from qkvmt.errors import UserError, report_user_errors
from qkvmt.files import removed_if_refused
from qkvmt.setting_types import check_setting_types

# The configuration ships inside the package, so an installed qkvmt has it wherever it runs; the
# repository's conf/ is a link to this folder, so the two are one set of files.
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

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


def nested_group_choices(argv: list[str]) -> list[str]:
    """`data.tokenizer=file` as Hydra spells the choice of a nested config group, `data/tokenizer=file`: a
    setting written with dots that names a group (conf/data/tokenizer/) chooses one of its files, as a
    top-level group's does (`model=tiny`); its settings stay dotted (`data.tokenizer.path=...`)."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and "." in key and not key.startswith(("+", "~")) and (CONF_DIR / key.replace(".", "/")).is_dir():
            arg = f"{key.replace('.', '/')}={value}"
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
    return [*argv[:1], *with_override(argv[1:], f"experiment={CPU_EXPERIMENT}")]


def with_override(args: list[str], override: str) -> list[str]:
    """`args` with `override` among the user's overrides. Hydra's argparse reads its overrides as
    one run of positional arguments, so one put after a flag (`--help`) or a flag's value
    (`--cfg job`) that follows them is an unrecognized argument. It goes just before the first
    override (argparse itself tells an override from a flag's value), or first of all where there
    is none (not last: `--info` would take it as its optional value)."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    try:
        given = parser.parse_known_args(args)[0].overrides
    except SystemExit:  # a malformed flag: Hydra's own parse reports it the same way
        given = []
    for at in [i for i, a in enumerate(args) if given and a == given[0]]:
        placed = [*args[:at], override, *args[at:]]
        parsed, extra = parser.parse_known_args(placed)
        if parsed.overrides == [override, *given] and not extra:
            return placed
    return [override, *args]


def hydra_command(function, config_name: str, text: tuple[str, ...] = (), argv=None, subcommand: str | None = None):
    """The main of a subcommand: `function(cfg)` with conf/<config_name>.yaml and any override,
    under `@hydra.main`; a user error is one line, no traceback.

    text: the settings that take free text, quoted for Hydra (quote_text_overrides).
    argv: changes the command line first (train's default experiment).
    subcommand: the name that follows the program on the command line (`qkvmt train ...`): Hydra
    reads the overrides without it, and it is put back while `function` runs, since a DDP
    launcher starts each worker with this process's command line.
    Hydra names the job after the function's module (qkvmt.pipeline.train -> train, whose log
    is train.log), which unwraps the decorators down to `function`.
    """
    import hydra  # here: `qkvmt --help` lists the subcommands without it

    @functools.wraps(function)  # Hydra's job name still comes from `function`'s module
    def checked_run(cfg):
        with hydras_folder_removed_if_refused():
            missing = sorted(OmegaConf.missing_keys(cfg))  # `???` in conf/: a setting the command line must give
            if missing:
                raise UserError(f"{missing[0]} has no value: give {missing[0]}=... on the command line")
            check_setting_types(cfg)
            return function(cfg)

    checked = report_user_errors(checked_run)

    @functools.wraps(checked)
    def task(cfg):
        if subcommand is not None:
            sys.argv[1:1] = [subcommand]
        return checked(cfg)

    main = hydra.main(config_path=str(CONF_DIR), config_name=config_name, version_base="1.3")(task)

    def run(cfg=None):
        if cfg is not None:  # as Hydra's own main: a given config passes straight through
            return main(cfg)
        if subcommand is not None:
            del sys.argv[1]
        sys.argv = nested_group_choices(quote_text_overrides(sys.argv, text))
        if argv is not None:
            sys.argv = argv(sys.argv)
        if not any(a.startswith("-") for a in sys.argv[1:]):  # flags (--help, -m, --cfg) are Hydra's to read
            report_user_errors(check_overrides)(config_name, sys.argv[1:])
        return main()

    return run


@contextlib.contextmanager
def hydras_folder_removed_if_refused():
    """A refused command leaves no run folder: Hydra makes it, with its record (.hydra/) and the
    job's log (train.log), before the command starts (files.removed_if_refused)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or HydraConfig.get().output_subdir is None:
        yield  # no record of Hydra's to tell a folder it made from the user's
        return
    hydra = HydraConfig.get()
    with removed_if_refused(Path(hydra.runtime.output_dir), hydra.output_subdir, f"{hydra.job.name}.log"):
        yield


def check_overrides(config_name: str, overrides: list[str]) -> None:
    """A UserError of one line for an override that names no setting, or no option of a group,
    naming the ones there are; Hydra's own report is several lines and names none."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        try:
            compose(config_name, overrides=overrides)
            return
        except Exception as e:  # Hydra's composition and grammar errors
            message = str(e).split("Config search path")[0]
        missing = re.search(r"Could not find '([^']+)/([^'/]+)'", message)  # the group: up to the last /
        if missing:
            group, option = missing.groups()
            options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
            name = group.replace("/", ".")  # a nested group as the command line names it (data.tokenizer)
            raise UserError(f"{name}={option}: no such {name}; use one of {', '.join(options)}")
        bad = re.match(r"Could not override '([^']+)'", message)
        if bad:
            rest = [o for o in overrides if o.partition("=")[0] != bad.group(1)]
            try:
                node = compose(config_name, overrides=rest)
            except Exception:  # another override is wrong too: Hydra's message alone
                node = None
            parts = bad.group(1).split(".")
            depth = 0  # the first part of the key that the configuration lacks
            while node is not None and OmegaConf.is_dict(node) and depth < len(parts) - 1 and parts[depth] in node:
                node, depth = node[parts[depth]], depth + 1
            if OmegaConf.is_dict(node):
                key, parent = ".".join(parts[: depth + 1]), ".".join(parts[:depth])
                where = f"settings under {parent}" if parent else "settings"
                raise UserError(
                    f"{key}: no such setting; the {where} are {', '.join(map(str, node.keys()))} "
                    f"(--cfg job shows them with their values; +{bad.group(1)}=VALUE adds a new one)"
                )
        raise UserError(" ".join(line.strip() for line in message.splitlines() if line.strip()))
