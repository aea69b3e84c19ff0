"""export(cfg): a checkpoint (or an average of several) as a CTranslate2 or Hugging Face model folder."""

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.export.to_ctranslate2 import check_quantization, export_ctranslate2, require_ctranslate2
from qkvmt.export.to_huggingface import check_exportable, export_huggingface, require_transformers
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, load_on_cpu

FORMATS = ("ctranslate2", "huggingface")


def export(cfg: DictConfig) -> dict:
    """Write `format`'s model folder to output_dir (default <run>/exports/<format>_<time>);
    everything is checked before the folder appears, and it appears only when complete."""
    if cfg.format not in FORMATS:
        raise UserError(f"format={cfg.format!r}: use format=ctranslate2 or format=huggingface")
    check_output_dir(cfg)
    if cfg.format == "ctranslate2":
        require_ctranslate2()
        check_quantization(cfg.quantization)
    else:
        require_transformers()
    model, tokenizer, meta, paths = load_on_cpu(cfg)
    if cfg.format == "huggingface":
        check_exportable(model)
    staged = StagedOutput(cfg, paths, cfg.format, kind="exports")
    with staged as out:
        if cfg.format == "ctranslate2":
            export_ctranslate2(model, tokenizer, meta, out, cfg.quantization)
        else:
            export_huggingface(model, tokenizer, meta, out)
    print(f"exported {paths[0] if len(paths) == 1 else f'the average of {len(paths)} checkpoints'} "
          f"as {cfg.format} to {staged.final}")
    return {"format": cfg.format, "output_dir": str(staged.final), "checkpoints": [str(p) for p in paths]}
