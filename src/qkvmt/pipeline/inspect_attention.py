"""inspect_attention(cfg): Q, K, V, scores, weights and output of one attention head for one sentence."""

from omegaconf import DictConfig

from qkvmt.pipeline.inference_setup import StagedOutput, check_output_dir, decode_overrides, load_for_inference
from qkvmt.setting_types import whole_number
from qkvmt.studies.checks import checked_kind
from qkvmt.text.sources import required_text


def inspect_attention(cfg: DictConfig) -> dict:
    sentence = required_text(cfg.sentence, "sentence")  # the settings first: loading is slow
    reference = None if cfg.reference is None else required_text(cfg.reference, "reference")
    for key in ("layer", "head"):  # negative ones count from the end
        whole_number(key, cfg[key], least=None)
    whole_number("top_k", cfg.top_k)
    checked_kind(cfg.kind)
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    result = model.inspect(sentence, reference, cfg.kind, cfg.layer, cfg.head, cfg.top_k, **decode)
    staged = StagedOutput(cfg, model.paths, f"{cfg.kind}_l{cfg.layer}_h{cfg.head}", kind="inspections")
    with staged as out:
        for name, write in result.files().items():
            write(out / name)
    print(
        f"{result.kind} attention, layer {result.layer}, head {result.head} (d_k={result.d_k}); target: {result.target}"
    )
    for q, top in zip(result.query_tokens, result.top_k):
        print(f"  {q:>14s} -> " + "  ".join(f"{t.token} {t.weight:.2f}" for t in top))
    print(f"wrote {staged.final}")
    return {"output_dir": str(staged.final), "check": result.check}
