"""intervene(cfg): one sentence translated as it is and with edits of its attention (Model.intervene),
or, with study=, a study on a corpus: of keys and values (qkvmt.pipeline.intervene_study) or of
what each encoder layer already knows (study=lens, qkvmt.pipeline.lens_study).

The edits come from the command line as a list whose items each name one edit type of
qkvmt.analysis.edits, in lower case, with that dataclass's fields:

    edits=[{swap: {a: 1, b: 6, what: keys}}, {zero: {layers: [0], heads: [1]}}]

is [Swap(a=1, b=6, what="keys"), Zero(layers=(0,), heads=(1,))]. `edits_of` reads them on its own,
so any mode of the command that applies edits reads them the same way.
"""

from dataclasses import fields
from itertools import groupby

from omegaconf import DictConfig, OmegaConf

from qkvmt.analysis.edits import EDITS
from qkvmt.errors import UserError
from qkvmt.pipeline.intervene_study import STUDIES, study
from qkvmt.pipeline.lens_study import lens_study
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, decode_overrides, load_for_inference
from qkvmt.text.sources import required_text

# The command-line name of each edit type: its class name in lower case, so a new type in EDITS
# is a name here with nothing else to add.
EDIT_TYPES = {cls.__name__.lower(): cls for cls in EDITS}
EXAMPLE = "edits=[{swap: {a: 1, b: 6, what: keys}}]"


def field_names(cls) -> list[str]:
    """An edit's fields as a user names them: its own first, then the scope every edit shares."""
    return [f.name for f in fields(cls) if not f.kw_only] + [f.name for f in fields(cls) if f.kw_only]


def edit_of(item, where: str):
    """One item of `edits`, {name: {field: value}}, as its dataclass; lists become tuples (the
    dataclasses' layers, heads and positions)."""
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
    # the values themselves are checked against the model when the edit compiles
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})


def edits_of(setting) -> list:
    """The `edits` setting (a list of {name: {field: value}}) as edit objects, checked before any
    model is loaded: an unknown edit or field is a one-line UserError naming the valid ones."""
    given = OmegaConf.to_container(setting) if OmegaConf.is_config(setting) else setting
    if not given:
        raise UserError(f"no edits given: give a list of {', '.join(EDIT_TYPES)}, e.g. '{EXAMPLE}'")
    if not isinstance(given, list):
        raise UserError(f"edits={given!r}: give a list of edits in brackets, e.g. '{EXAMPLE}'")
    return [edit_of(item, f"edits[{i}]") for i, item in enumerate(given)]


def bracketed(text: str, changed: list[bool]) -> str:
    """`text` with each run of changed words in [brackets]."""
    runs = [(c, " ".join(w for w, _ in run)) for c, run in groupby(zip(text.split(), changed), key=lambda wc: wc[1])]
    return " ".join(f"[{words}]" if c else words for c, words in runs)


def intervene(cfg: DictConfig) -> dict:
    """`sentence` translated without and with `edits`: both translations printed, the files written.
    With `study`, the corpus study instead."""
    if cfg.study is not None:
        if cfg.sentence is not None or cfg.edits is not None:
            raise UserError(f"study={cfg.study} measures a corpus of its own edits: leave sentence= and edits= unset")
        if cfg.study not in (*STUDIES, "lens"):
            raise UserError(f"study={cfg.study!r}: use one of {', '.join((*STUDIES, 'lens'))}")
        return lens_study(cfg) if cfg.study == "lens" else study(cfg)
    sentence = required_text(cfg.sentence, "sentence")  # the settings first: loading is slow
    edits = edits_of(cfg.edits)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    result = model.intervene(sentence, *edits, **decode_overrides(cfg.decode))
    staged = StagedOutput(cfg, model.paths, "_".join(type(e).__name__.lower() for e in edits), kind="interventions")
    with staged as out:
        for name, write in result.files().items():
            write(out / name)
    change = float(result.log_prob_change.sum())
    print(f"original: {result.original}")
    print(f"edited:   {bracketed(result.edited, result.changed)}")
    print(
        f"log-probability of the original translation: {result.log_prob.sum():.3f} without the edits, "
        f"{result.log_prob_edited.sum():.3f} with them ({round(change, 3) + 0.0:+.3f})"  # + 0.0: never -0.000
    )
    print(f"wrote {staged.final}")
    return {
        "output_dir": str(staged.final),
        "original": result.original,
        "edited": result.edited,
        "changed_words": sum(result.changed),
        "log_prob_change": change,
    }
