"""inspect(cfg): Q, K, V, scores, weights and output of one attention head for one sentence."""

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.files import write_json
from qkvmt.views.inspection import inspect_head
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, load_for_inference, required_text, target_of
from qkvmt.views.report import inspector_page


def inspect(cfg: DictConfig) -> dict:
    sentence = required_text(cfg.sentence, "sentence")  # the settings first: loading is slow
    for key in ("layer", "head", "top_k"):
        if not isinstance(cfg[key], int):
            raise UserError(f"{key}={cfg[key]!r}: give a whole number")
    check_output_dir(cfg)
    model, tokenizer, meta, fabric, paths = load_for_inference(cfg)
    target, forced = target_of(cfg, model, tokenizer, meta, fabric, sentence)
    data = inspect_head(model, tokenizer, sentence, forced, cfg.kind, cfg.layer, cfg.head, cfg.top_k)
    staged = StagedOutput(cfg, paths, f"{cfg.kind}_l{cfg.layer}_h{cfg.head}", kind="inspections")
    with staged as out:
        write_json(out / "inspect.json", data)
        inspector_page(out / "inspect.html", data)
    out = staged.final
    print(f"{data['kind']} attention, layer {data['layer']}, head {data['head']} (d_k={data['d_k']}); target: {target}")
    for q, top in zip(data["query_tokens"], data["top_k"]):
        print(f"  {q:>14s} -> " + "  ".join(f"{t['token']} {t['weight']:.2f}" for t in top))
    print(f"wrote {out}")
    return {"output_dir": str(out), "check": data["check"]}
