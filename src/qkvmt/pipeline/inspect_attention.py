"""inspect(cfg): Q, K, V, scores, weights and output of one attention head for one sentence."""

from pathlib import Path

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.inspection import inspect_head
from qkvmt.pipeline.evaluate import checkpoint_decoding, default_output_dir, load_for_inference
from qkvmt.report import inspector_page
from qkvmt.translation import translate_lines


def inspect(cfg: DictConfig) -> dict:
    model, tokenizer, meta, fabric, paths = load_for_inference(cfg)
    sentence = "" if cfg.sentence is None else str(cfg.sentence)
    if not sentence.strip():
        raise UserError('sentence is empty: give the source sentence, e.g. sentence="Ein Mann fährt Fahrrad ."')
    with fabric.autocast():
        target = str(cfg.reference) if cfg.reference is not None else translate_lines(model, tokenizer, [sentence], checkpoint_decoding(cfg.decode, meta))[0]
    data = inspect_head(model, tokenizer, sentence, target, cfg.kind, int(cfg.layer), int(cfg.head), int(cfg.top_k))
    out = Path(cfg.output_dir) if cfg.output_dir else default_output_dir(paths[0], f"{cfg.kind}_l{cfg.layer}_h{cfg.head}", kind="inspections")
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "inspect.json", data)
    inspector_page(out / "inspect.html", data)
    print(f"{data['kind']} attention, layer {data['layer']}, head {data['head']} (d_k={data['d_k']}); target: {target}")
    for q, top in zip(data["query_tokens"], data["top_k"]):
        print(f"  {q:>14s} -> " + "  ".join(f"{t['token']} {t['weight']:.2f}" for t in top))
    print(f"wrote {out}")
    return {"output_dir": str(out), "check": data["check"]}
