"""Edits written as data, {name: {field: value}}: what `qkvmt intervene edits=[...]` and the
explorer's what-if requests give. One parser for every surface, so they accept and refuse alike;
each field's type is checked as the edit is made (qkvmt.analysis.edits), its values against the
model as it compiles.
"""

from dataclasses import fields

from qkvmt.analysis.edits import EDITS
from qkvmt.errors import UserError

# The name of each edit written as data: its class name in lower case, so a new type in EDITS is a
# name here with nothing else to add.
EDIT_TYPES = {cls.__name__.lower(): cls for cls in EDITS}
EXAMPLE = "edits=[{swap: {a: 1, b: 6, what: keys}}]"


def field_names(cls) -> list[str]:
    """An edit's fields as a user names them: its own first, then the scope every edit shares."""
    return [f.name for f in fields(cls) if not f.kw_only] + [f.name for f in fields(cls) if f.kw_only]


def edit_of(item, where: str):
    """One edit written as data, {name: {field: value}}, as its dataclass, every field's type
    checked (its values are checked against the model when it compiles); `where` names the item
    in the one-line UserError."""
    if not isinstance(item, dict) or len(item) != 1:
        raise UserError(
            f"{where}={item!r}: give one edit as {{name: {{field: value, ...}}}}, e.g. {EXAMPLE}; "
            f"the edits are {', '.join(EDIT_TYPES)}"
        )
    ((name, given),) = item.items()
    if name not in EDIT_TYPES:
        raise UserError(f"{where}: no edit {name!r}; use one of {', '.join(EDIT_TYPES)}")
    given = {} if given is None else given  # {swap: null}: every field at its default
    cls, names = EDIT_TYPES[name], field_names(EDIT_TYPES[name])
    if not isinstance(given, dict):
        raise UserError(f"{where}.{name}={given!r}: give its fields, {{{', '.join(f'{n}: ...' for n in names)}}}")
    unknown = [k for k in given if k not in names]
    if unknown:
        raise UserError(f"{where}.{name}.{unknown[0]}: {name} has no such field; its fields are {', '.join(names)}")
    return cls(**given)


def edits_of(given) -> list:
    """A list of edits written as data (`edit_of` each), checked before any model is loaded."""
    if not given:
        raise UserError(f"no edits given: give a list of {', '.join(EDIT_TYPES)}, e.g. '{EXAMPLE}'")
    if not isinstance(given, list):
        raise UserError(f"edits={given!r}: give a list of edits in brackets, e.g. '{EXAMPLE}'")
    return [edit_of(item, f"edits[{i}]") for i, item in enumerate(given)]
