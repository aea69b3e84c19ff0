"""qkvmt: encoder-decoder Transformers for machine translation, with attention as a first-class output.

    import qkvmt
    qkvmt.pretrained()                              # the trained models that ship with qkvmt
    model = qkvmt.load("multi30k-de-en")            # one of them, or a run folder, a .ckpt, a model folder
    model.translate(["Ein Mann fährt Fahrrad ."])
    model.attention("Ein Mann fährt Fahrrad .")     # shows itself in a notebook; .save(folder)
    model.intervene("Ein Hund rennt .", qkvmt.Swap(1, 2, "keys"))   # the translation with an edit

The names below are imported on first use, so `import qkvmt` stays light for the commands
whose worker processes only need a submodule.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "load": "qkvmt.api",
    "pretrained": "qkvmt.bundled",
    "Model": "qkvmt.api",
    "CTranslate2Model": "qkvmt.export.ctranslate2_engine",
    "DecodeConfig": "qkvmt.decoding.search",
    "AlignmentPolicy": "qkvmt.alignment.policy",
    "Translations": "qkvmt.results.translations",
    "SentenceAttention": "qkvmt.results.sentence_attention",
    "AttentionMap": "qkvmt.analysis.forced",
    "SentenceAlignment": "qkvmt.results.sentence_alignment",
    "HeadInspection": "qkvmt.results.inspection",
    "Intervention": "qkvmt.results.intervention",
    "Lens": "qkvmt.studies.lens.result",
    "TwoWayAlignment": "qkvmt.results.two_way_alignment",
    "CorpusAlignment": "qkvmt.results.corpus_alignment",
    "AERReport": "qkvmt.results.aer",
    "Evaluation": "qkvmt.results.evaluation",
    "HeadsReport": "qkvmt.results.heads",
    "Faithfulness": "qkvmt.studies.faithfulness.result",
    "KeyValueStudy": "qkvmt.studies.kv.result",
    "LensStudy": "qkvmt.studies.lens.study",
    "Swap": "qkvmt.analysis.edits",
    "Zero": "qkvmt.analysis.edits",
    "Patch": "qkvmt.analysis.edits",
    "Knockout": "qkvmt.analysis.edits",
    "UserError": "qkvmt.errors",
    "Cache": "qkvmt.results.cache",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'qkvmt' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__():
    return sorted([*globals(), *__all__])
