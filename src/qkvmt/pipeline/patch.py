"""patch(cfg): causal tracing over a file of clean sources and one of corrupt ones (Model.patch_study),
written as patch.json, patch.md and patch.png."""

import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from qkvmt.errors import UserError
from qkvmt.pipeline.inference_setup import check_output_dir, decode_overrides, load_for_inference, save_result
from qkvmt.setting_types import path_text, whole_number
from qkvmt.studies.checks import patch_settings
from qkvmt.text.sources import checked_file, read_lines


def patch(cfg: DictConfig) -> dict:
    start = time.time()
    files = {}
    for key in ("clean_file", "corrupt_file"):
        given = path_text(cfg[key])
        if given is None:
            raise UserError(f"{key} is not set: give {key}=<a text file, one source a line>")
        files[key] = checked_file(given)
    if cfg.n is not None:
        whole_number("n", cfg.n, least=1)
    patch_settings(cfg.method, cfg.batch_size, cfg.check)  # before the slow load
    names = OmegaConf.to_object(cfg.names) if OmegaConf.is_list(cfg.names) else cfg.names
    decode = decode_overrides(cfg.decode)
    check_output_dir(cfg)
    clean, corrupt = (read_lines(files[k])[: cfg.n] for k in files)
    if len(clean) != len(corrupt):
        raise UserError(
            f"{files['clean_file']} has {len(clean)} lines and {files['corrupt_file']} {len(corrupt)}: "
            "give a corrupt source for each clean one, line for line"
        )
    model = load_for_inference(cfg)
    found = model.patch_study(
        clean, corrupt, names, cfg.metric, cfg.method, cfg.unequal, cfg.batch_size, cfg.check, **decode
    )
    name = Path(files["clean_file"]).name.split(".")[0]
    # what `qkvmt results add=` records of the command: the pairs' files by name, as the record names a split
    found.result |= {"split": name, "files": {k: Path(v).name for k, v in files.items()}, "names_given": names}
    found.result["wall_s"] = round(time.time() - start, 1)
    final = save_result(cfg, model.paths, found, name, "patch")
    print(found.summary() + f"\nwrote {final}")
    return found.result | {"output_dir": str(final)}
