"""What evaluate, translate, average, align, inspect and export share: the model of a
checkpoint (or an average of several) as the command line names it, decoding settings given
on the command line, run folders and output folders."""

import hashlib
import time
from dataclasses import asdict
from functools import partial
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.api import Model
from qkvmt.bundled import bundled_name
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.files import StagedFolder, check_new_output, sha256
from qkvmt.loading import resolve_average
from qkvmt.results.result import Result
from qkvmt.setting_types import path_text
from qkvmt.training_run import run_folder


def checkpoint_paths(cfg: DictConfig) -> list[Path]:
    average = OmegaConf.to_object(cfg.average) if OmegaConf.is_list(cfg.average) else cfg.average
    return resolve_average(path_text(cfg.ckpt_path), average)


def load_for_inference(cfg: DictConfig, **fabric_settings) -> Model:
    """The model of ckpt_path, or of the average of the checkpoints `average` names, placed by
    the Lightning Fabric cfg.fabric configures (a GPU when there is one), with `fabric_settings`
    over it. The Fabric is made once the files are read: Lightning takes seconds to import.
    src_lang, tgt_lang: a many-to-many model's pair (null: the one its folder names)."""
    fabric = partial(instantiate, cfg.fabric, **fabric_settings)
    return Model.from_checkpoints(checkpoint_paths(cfg), fabric, cfg.get("src_lang"), cfg.get("tgt_lang"))


def decode_overrides(cfg_decode: DictConfig) -> dict:
    """The decoding settings a command's `decode` gives, as keywords over the checkpoint's own (every
    command passes them to the model: Model.decoding): each field of decode=default
    (conf/decode/default.yaml), or those typed beside decode=checkpoint (all null there). Checked
    here, before any model loads, as DecodeConfig checks them: decode=checkpoint builds nothing early."""
    given = {k: v for k, v in OmegaConf.to_container(cfg_decode).items() if v is not None and k != "_target_"}
    DecodeConfig.merged(asdict(DecodeConfig()), given)
    return given


def beside_checkpoint(cfg: DictConfig, paths: list[Path], name: str) -> Path:
    """Where a command records a result that belongs to one checkpoint (or one average):
    <run>/<name>_<id>.json, the id a digest of the files, so a result found for one checkpoint
    is never taken for another's."""
    ident = hashlib.sha256("\n".join(sha256(p) for p in paths).encode()).hexdigest()[:12]
    return results_home(cfg, paths) / f"{name}_{ident}.json"


def results_home(cfg: DictConfig, paths: list[Path]) -> Path:
    """Where results of these checkpoints go by default: their run's folder, or for a bundled
    model <paths.log_dir>/pretrained/NAME, since the installed package is no place for them."""
    name = bundled_name(paths[0])
    return Path(cfg.paths.log_dir) / "pretrained" / name if name else run_folder(paths[0])


def default_output_dir(home: Path, name: str, kind: str = "evaluations") -> Path:
    """A new folder <home>/<kind>/<name>_<time>[-k] (home: results_home), created here so
    that two commands finishing in the same second never share it."""
    base = home / kind / f"{name}_{time.strftime('%Y-%m-%d_%H-%M-%S')}"
    base.parent.mkdir(parents=True, exist_ok=True)
    out, k = base, 1
    while True:
        try:
            out.mkdir()
            return out
        except FileExistsError:
            out, k = base.with_name(f"{base.name}-{k}"), k + 1


def check_output_dir(cfg: DictConfig) -> None:
    """An explicit output_dir that cannot take the outputs is refused before any slow work; so is an
    empty one, which is not the default folder that leaving output_dir out asks for."""
    if cfg.output_dir == "":
        raise UserError("output_dir is empty: give a folder for the outputs, or leave output_dir out for a new one")
    if cfg.output_dir is not None:
        check_new_output(Path(str(cfg.output_dir)), "output_dir", folder=True)  # output_dir=5 is a path too


class StagedOutput(StagedFolder):
    """A command's output folder, whole or not at all (qkvmt.files.StagedFolder): output_dir,
    or a new <run>/<kind>/<name>_<time> beside the checkpoint's run (results_home).

        staged = StagedOutput(cfg, paths, "align", kind="alignments")
        with staged as out:
            write_json(out / "alignment.json", data)
        print(staged.final)
    """

    def __init__(self, cfg: DictConfig, paths: list[Path], name: str, kind: str):
        explicit = Path(str(cfg.output_dir)) if cfg.output_dir is not None else None
        home = results_home(cfg, paths)
        parent = explicit.parent if explicit else home / kind
        super().__init__(parent, name, final=lambda: explicit or default_output_dir(home, name, kind=kind))


def save_result(cfg: DictConfig, paths: list[Path], result: Result, name: str, kind: str) -> Path:
    """Every file of `result` (qkvmt.results.result.Result) in the command's output folder, whole or
    not at all (StagedOutput); the folder."""
    staged = StagedOutput(cfg, paths, name, kind=kind)
    with staged as out:
        for file, write in result.files().items():
            write(out / file)
    return staged.final
