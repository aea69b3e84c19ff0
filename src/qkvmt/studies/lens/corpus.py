"""What each encoder layer already knows, on a corpus (`Model.lens_study`, `qkvmt intervene
study=lens`): the sentences translated with the decoder reading each encoder depth in turn
(DecoderLens, qkvmt.studies.lens.passes), each depth's translations scored against the references and
against the model's own (the last depth)."""

import time

import torch

from qkvmt.host.machine import recorded_with
from qkvmt.studies.checks import whole_numbers
from qkvmt.studies.lens.passes import depth_translations
from qkvmt.studies.lens.study import LensStudy
from qkvmt.studies.model_protocol import ModelLike, identity
from qkvmt.text.metrics import score


def depth_scores(translations: list[list[str]], references: list[str]) -> list[dict]:
    """For each encoder depth: BLEU and chrF against the references, chrF against the last depth's
    translations (the model's own), and how many sentences it translates as the model does."""
    own = translations[-1]
    rows = []
    for depth, hyps in enumerate(translations, start=1):
        ref, same = score(hyps, references), score(hyps, own)
        rows.append(
            {
                "encoder_layers": depth,
                "bleu": ref["bleu"],
                "chrf": ref["chrf"],
                "chrf_vs_model": same["chrf"],
                "same_as_model": sum(h == o for h, o in zip(hyps, own)) / max(len(own), 1),
            }
        )
    return rows


def lens_study(
    model: ModelLike, sources: list[str], references: list[str], n: int = 300, name: str = "sentences", **decode
) -> LensStudy:
    """The first n of `sources` (named `name`) translated from each encoder depth, scored against
    `references`."""
    start = time.time()
    whole_numbers({"n": n})
    sources, references = sources[:n], references[:n]
    decode = model.decoding(**decode)
    with torch.no_grad(), model.fabric.autocast():
        translations = depth_translations(model.transformer, model.tokenizer, sources, decode, progress=True)
    signatures = score(translations[-1], references)["signatures"]
    result = {
        **identity(model),
        "split": name,
        "study": "lens",
        "n": len(sources),
        "depths": depth_scores(translations, references),
        "signatures": {"bleu": signatures["bleu"], "chrf": signatures["chrf"]},
        **recorded_with(),
        "seconds": {"translate at every depth": round(time.time() - start, 1)},
        "wall_s": round(time.time() - start, 1),
    }
    return LensStudy(result, translations)
