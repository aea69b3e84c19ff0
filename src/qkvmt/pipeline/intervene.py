"""intervene(cfg): one sentence translated as it is and with edits of its attention (Model.intervene),
or, with study=, a study on a corpus: of keys and values (qkvmt.pipeline.intervene_study) or of
what each encoder layer already knows (study=lens, qkvmt.pipeline.lens_study).

The edits come from the command line as a list whose items each name one edit type of
qkvmt.analysis.edits, in lower case, with that dataclass's fields:

    edits=[{swap: {a: 1, b: 6, what: keys}}, {zero: {layers: [0], heads: [1]}}]

is [Swap(a=1, b=6, what="keys"), Zero(layers=(0,), heads=(1,))], read by qkvmt.analysis.edits.edits_of,
which the explorer's what-if panel uses too.
"""

from itertools import groupby

from omegaconf import DictConfig, OmegaConf

from qkvmt.analysis.edits import edits_of
from qkvmt.errors import UserError
from qkvmt.pipeline.inference_setup import StagedOutput, check_output_dir, decode_overrides, load_for_inference
from qkvmt.pipeline.intervene_study import STUDIES, study
from qkvmt.pipeline.lens_study import lens_study
from qkvmt.text.sources import required_text


def bracketed(text: str, changed: list[bool]) -> str:
    """`text` with each run of changed words in [brackets]."""
    runs = [(c, " ".join(w for w, _ in run)) for c, run in groupby(zip(text.split(), changed), key=lambda wc: wc[1])]
    return " ".join(f"[{words}]" if c else words for c, words in runs)


def intervene_command(cfg: DictConfig) -> dict:
    """`sentence` translated without and with `edits`: both translations printed, the files written.
    With `study`, the corpus study instead."""
    if cfg.study is not None:
        if cfg.sentence is not None or cfg.edits is not None:
            raise UserError(f"study={cfg.study} measures a corpus of its own edits: leave sentence= and edits= unset")
        if cfg.study not in (*STUDIES, "lens"):
            raise UserError(f"study={cfg.study!r}: use one of {', '.join((*STUDIES, 'lens'))}")
        return lens_study(cfg) if cfg.study == "lens" else study(cfg)
    sentence = required_text(cfg.sentence, "sentence")  # the settings first: loading is slow
    edits = edits_of(OmegaConf.to_container(cfg.edits) if OmegaConf.is_config(cfg.edits) else cfg.edits)
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    result = model.intervene(sentence, *edits, **decode)
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
