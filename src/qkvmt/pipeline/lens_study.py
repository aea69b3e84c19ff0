"""lens_study(cfg): what each encoder layer already knows, on a split (`qkvmt intervene
study=lens`): the split translated with the decoder reading each encoder depth in turn
(DecoderLens, qkvmt.analysis.lens), each depth's translations scored against the references and
against the model's own (the last depth), written as study.json and study.md."""

import datetime
import time

import torch
from omegaconf import DictConfig

from qkvmt.analysis.lens import depth_translations
from qkvmt.bundled import bundled_name
from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.results import this_machine
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, decode_overrides, load_for_inference
from qkvmt.record.lens_table import depth_table
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


def lens_study(cfg: DictConfig) -> dict:
    start = time.time()
    if isinstance(cfg.n, bool) or not isinstance(cfg.n, int) or cfg.n < 1:
        raise UserError(f"n={cfg.n!r}: give a whole number, 1 or more")
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    sources, references, name = read_inputs(cfg, model.meta, model.paths[0])
    sources, references = sources[: cfg.n], references[: cfg.n]
    decode = model.decoding(**decode_overrides(cfg.decode))
    with torch.no_grad(), model.fabric.autocast():
        translations = depth_translations(model.transformer, model.tokenizer, sources, decode, progress=True)
    signatures = score(translations[-1], references)["signatures"]
    result = {
        "model": bundled_name(model.paths[0]) or str(model.paths[0]),
        "checkpoints": [str(p) for p in model.paths],
        "split": name,
        "study": "lens",
        "n": len(sources),
        "depths": depth_scores(translations, references),
        "signatures": {"bleu": signatures["bleu"], "chrf": signatures["chrf"]},
        "machine": this_machine(),  # what `qkvmt results add=<this folder>` records it with
        "threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "seconds": {"translate at every depth": round(time.time() - start, 1)},
        "wall_s": round(time.time() - start, 1),
    }
    summary = depth_table(result) + "\n"
    staged = StagedOutput(cfg, model.paths, f"lens_{name}", kind="kv_study")
    with staged as out:
        write_json(out / "study.json", result)
        write_text(out / "study.md", summary)
        write_text(
            out / "translations.txt", "".join(f"{d + 1}\t{t}\n" for d, ts in enumerate(translations) for t in ts)
        )
    print(summary, end="")
    print(f"{result['n']} sentences in {result['wall_s']:.0f} s; wrote {staged.final}")
    return result | {"output_dir": str(staged.final)}
