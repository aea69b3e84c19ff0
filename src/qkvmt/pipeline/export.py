"""export(cfg): a checkpoint (or an average of several) as a model folder of another runtime
(qkvmt.export.formats: CTranslate2, Hugging Face)."""

from omegaconf import DictConfig

from qkvmt.export.formats import export_format
from qkvmt.pipeline.inference_setup import StagedOutput, check_output_dir, load_for_inference


def export(cfg: DictConfig) -> dict:
    """Write `format`'s model folder to output_dir (default <run>/exports/<format>_<time>);
    everything is checked before the folder appears, and it appears only when complete."""
    fmt = export_format(cfg)
    check_output_dir(cfg)
    # The weights are copied out on the CPU.
    model = load_for_inference(cfg, accelerator="cpu", devices=1, precision="32-true")
    fmt.check(model.transformer)
    staged = StagedOutput(cfg, model.paths, cfg.format, kind="exports")
    with staged as out:
        fmt.write(model.transformer, model.tokenizer, model.meta, out)
    paths = model.paths
    print(
        f"exported {paths[0] if len(paths) == 1 else f'the average of {len(paths)} checkpoints'} "
        f"as {cfg.format} to {staged.final}"
    )
    return {"format": cfg.format, "output_dir": str(staged.final), "checkpoints": [str(p) for p in paths]}
