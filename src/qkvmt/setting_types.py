"""Settings of the wrong type, found before any command runs (`decode.beam_size=abc`), and the
one check of a count that the commands run on their own settings before any slow work
(whole_number).

Hydra passes a value of any type on to the class a config group builds (`_target_`); the class
then fails on it in its own way, and Hydra reports that in several lines that name neither the
setting nor what it takes. Every command's configuration is read here first, against the types
the qkvmt classes it builds declare, so such a value is one line naming the key and its type.
"""

import functools
import importlib
import types
import typing

from omegaconf import DictConfig, OmegaConf

from qkvmt.errors import UserError

# What to give, for the types a setting can declare that a class would misread: not str, whose
# settings are names that the classes check themselves, and to which a number can be a fair name.
WANTED = {bool: "true or false", int: "a whole number", float: "a number"}


def check_setting_types(cfg: DictConfig, prefix: str = "") -> None:
    """A UserError for the first setting under `cfg` whose value is not of the type that the qkvmt
    class or function of its `_target_` declares for it. null passes (many settings take it for
    "unset"), as do settings whose type is not a plain bool, int or float, or their optional."""
    for key in cfg:
        node = cfg._get_node(key)
        if isinstance(node, DictConfig) and not node._is_missing() and not node._is_none():
            check_setting_types(node, f"{prefix}{key}.")
    target = cfg.get("_target_") if OmegaConf.is_dict(cfg) else None
    if not isinstance(target, str) or not target.startswith("qkvmt."):
        return  # a library's class checks its own (and may be slow to import)
    values = {}
    for key in declared_types(target):
        try:
            if key in cfg and not OmegaConf.is_missing(cfg, key):
                values[key] = cfg[key]
        except Exception:  # an interpolation that does not resolve: Hydra's to report
            continue
    check_values(target, values, prefix)


def check_fields(config, prefix: str) -> None:
    """The same check of a typed config built without Hydra's `_target_` (DecodeConfig.merged
    from decode=checkpoint), its settings named under `prefix` ("decode.")."""
    cls = type(config)
    check_values(f"{cls.__module__}.{cls.__qualname__}", vars(config), prefix)


def check_values(target: str, values: dict, prefix: str) -> None:
    """A UserError for the first of `values` that is not null and not of the type `target` declares."""
    for key, wanted in declared_types(target).items():
        value = values.get(key)
        if value is not None and not fits(value, wanted):
            raise UserError(f"{prefix}{key}={as_typed(value)}: give {WANTED[wanted]} ({wanted.__name__})")


def whole_number(name: str, value, least: int | None = 1, most: int | None = None) -> int:
    """`value`, setting `name`'s, if it is a whole number from `least` (None: any, as a layer
    counted from the end) up to `most`, else a UserError naming the setting, its value and what it
    takes."""
    if not is_whole(value, least, most):
        span = (
            ""
            if least is None and most is None
            else f" of at least {least}"
            if most is None
            else f" from {least} to {most:,}"
        )
        raise UserError(f"{name}={as_typed(value)}: give a whole number{span}")
    return value


def true_or_false(name: str, value) -> bool:
    """`value`, setting `name`'s, if it is true or false, else a UserError naming the setting: a plain
    setting's `check=abc` would otherwise count as true."""
    if not isinstance(value, bool):
        raise UserError(f"{name}={as_typed(value)}: give true or false")
    return value


def is_whole(value, least: int | None = None, most: int | None = None) -> bool:
    """Whether `value` is a whole number within `least` and `most` (None: unbounded); true is none."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (least is None or value >= least) and (most is None or value <= most)


def path_text(value) -> str | None:
    """A path setting's value as text (None: unset): the command line reads ckpt_path=5 or output=true as a
    number or a flag, which name a file all the same."""
    return None if value is None else value if isinstance(value, str) else as_typed(value)


def as_typed(value) -> str:
    """A setting's value as a user types it on the command line: true, not True."""
    return str(value).lower() if isinstance(value, bool) else repr(value)


@functools.cache  # read once a process: DecodeConfig is built per request in the explorer
def declared_types(target: str) -> dict[str, type]:
    """The plain types (bool, int, float; optional or not) of the settings `target` takes."""
    module, _, name = target.rpartition(".")
    try:
        built = getattr(importlib.import_module(module), name)
        hints = typing.get_type_hints(
            built
            if isinstance(built, type) and hasattr(built, "__dataclass_fields__")
            else getattr(built, "__init__", built)
        )
    except Exception:  # a target Hydra will report itself, or annotations that do not resolve
        return {}
    out = {}
    for key, hint in hints.items():
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
            hint = args[0]  # X | None
        if hint in WANTED:
            out[key] = hint
    return out


def fits(value, wanted: type) -> bool:
    """Whether `value` is a `wanted`: a whole number is a number, and true is no number."""
    if wanted is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if wanted is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, bool)
