"""The settings of `qkvmt align`, read and checked before the model loads where they can be: which
mode (a sentence, a corpus, gold links), the corpus's files, the reverse model, the policy of one
model (alignment.head=best reads an AER run's result), and the reference aligner's training pairs."""

import json
import logging
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from qkvmt.alignment.directions import AUTO, check_unpaired, checked_method
from qkvmt.alignment.policy import AlignmentPolicy, checked_choices
from qkvmt.alignment.reference import reference_aligner
from qkvmt.api import Model
from qkvmt.bundled import resolve, reverse_of
from qkvmt.errors import UserError
from qkvmt.pipeline.inference_setup import beside_checkpoint
from qkvmt.setting_types import as_typed, is_whole, path_text, whole_number
from qkvmt.text.sources import LineFile, checked_file, stream_lines
from qkvmt.training_run import run_data, run_folder

log = logging.getLogger(__name__)

# What each other mode's setting would do instead, for the one-line refusal of a mix.
OTHER_MODES = {
    "sentence": "aligns one sentence",
    "reference": "gives one sentence's translation",
    "gold_dir": "scores every head against gold links",
}


def corpus_files(cfg: DictConfig) -> tuple[LineFile, LineFile] | None:
    """The files of src_file= and tgt_file=, checked before the model loads (None: neither is
    given): both given, no other mode's setting beside them, both readable UTF-8 text of equal
    line counts. Counting reads each file once, a line at a time."""
    if not (cfg.src_file or cfg.tgt_file):
        return None
    if not (cfg.src_file and cfg.tgt_file):
        given, missing = ("src_file", "tgt_file") if cfg.src_file else ("tgt_file", "src_file")
        raise UserError(
            f"{given}= needs {missing}=: give both src_file=<path> and tgt_file=<path>, line-parallel (plain or .gz)"
        )
    for name, what in OTHER_MODES.items():
        if cfg[name] is not None:
            raise UserError(
                f"src_file= and tgt_file= align a corpus, and {name}= {what}: drop {name}= to align the files"
            )
    whole_number("batch_tokens", cfg.batch_tokens)
    whole_number("chunk_pairs", cfg.chunk_pairs)
    if cfg.reference_aligner:  # installed? before the slow part
        reference_aligner(cfg.reference_aligner, cfg.reference_symmetrization, "reference_aligner")
    src, tgt = checked_file(cfg.src_file), checked_file(cfg.tgt_file)
    n_src, n_tgt = (sum(1 for _ in stream_lines(path)) for path in (src, tgt))
    if n_src != n_tgt:
        raise UserError(
            f"src_file={src} has {n_src} lines but tgt_file={tgt} has {n_tgt}: "
            "they must be line-parallel, one sentence pair per line"
        )
    return LineFile(src, n_src), LineFile(tgt, n_tgt)


def check_gold_settings(cfg: DictConfig, corpus: bool) -> None:
    """The settings of scoring against gold links are refused without gold_dir=, where they
    could not take effect (reference_aligner also aligns a corpus beside)."""
    whole_number("gold_dev", cfg.gold_dev, least=0)
    if cfg.gold_dir:
        return
    given = ["leaderboard=true"] if cfg.leaderboard else []
    given += [f"gold_dev={cfg.gold_dev}"] if cfg.gold_dev else []
    given += ["leaderboard_signals=..."] if cfg.leaderboard_signals else []
    given += [f"reference_aligner={cfg.reference_aligner}"] if cfg.reference_aligner and not corpus else []
    if given:
        raise UserError(
            f"{given[0]} belongs to scoring against gold links: add gold_dir=<folder>, or drop it"
            + ("" if corpus else " (reference_aligner= also aligns a corpus, src_file= tgt_file=, beside)")
        )


def check_policy_settings(cfg: DictConfig) -> None:
    """alignment.*, as far as no model is needed to check them (the model bounds layer and head
    once it loads): a whole layer (negative: from the end), a head's number from 0, mean or best."""
    a = cfg.alignment
    if a.layer is not None:
        whole_number("alignment.layer", a.layer, least=None)
    if a.head is not None and a.head not in ("mean", "best") and not is_whole(a.head, 0):
        raise UserError(f"alignment.head={as_typed(a.head)}: use mean, best, or a head's number from 0")
    checked_choices(a.rows, a.direction, a.signal, a.drop)


def one_model_settings(cfg: DictConfig) -> list[str]:
    """The settings given that read one model's own layers and heads, or score them one by one
    (the AER table's choices): linking with a reverse model could not honour them."""
    a = cfg.alignment
    given = [f"alignment.{k}={a[k]}" for k in ("layer", "head", "direction") if a[k] is not None]
    if not cfg.gold_dir:
        return given
    given += ["leaderboard=true"] if cfg.leaderboard else []
    given += [f"reference_aligner={cfg.reference_aligner}"] if cfg.reference_aligner else []
    return given


def reverse_checkpoint(cfg: DictConfig, paths: list[Path], one_model: list[str] = ()) -> Path | None:
    """The checkpoint whose links are symmetrized with those of `paths` (ckpt_path), or None.

    reverse_ckpt_path=<path or bundled name>: that one; null: none; auto: the bundled model of
    the other direction when ckpt_path is a bundled model that has one (a run's checkpoint has
    no known partner). `one_model`: the settings given that read one model's own layers and
    heads (e.g. alignment.layer=1); beside them auto links with the one model, and an explicit
    reverse_ckpt_path, which could not honour them, is a UserError. Checked before any model
    loads, with symmetrize= and symmetrize_threshold=, which without a partner (given, not left
    to auto) could not take effect: a UserError."""
    given = path_text(cfg.reverse_ckpt_path)
    if given is None:
        partner = None
    elif given == AUTO:
        partner = None if len(paths) != 1 or one_model else reverse_of(paths[0])
        if partner is not None:
            log.info("linking with %s too, then symmetrizing (reverse_ckpt_path=null: this model alone)", partner.name)
    elif one_model:
        raise UserError(
            f"{one_model[0]} reads one model's own heads, which linking with two models cannot honour: drop it, "
            f"or drop reverse_ckpt_path={given} (reverse_ckpt_path=null links with ckpt_path alone)"
        )
    else:
        partner = resolve(given)
    method, threshold = checked_method(cfg.symmetrize, cfg.symmetrize_threshold)
    if partner is None:
        check_unpaired(
            method,
            threshold,
            " (reverse_ckpt_path=null, a run's checkpoint, or a setting that reads one model's heads)",
            "reverse_ckpt_path=<a model of the other direction>",
        )
    return partner


def best_file(cfg: DictConfig, paths: list[Path]) -> Path:
    """Where an AER run records its best policy: <run>/aer_<id>.json, one per checkpoint (or
    average), so a best head found for one checkpoint is never applied to another."""
    return beside_checkpoint(cfg, paths, "aer")


def policy(cfg: DictConfig, model: Model) -> tuple[AlignmentPolicy, dict]:
    """The policy to extract links with, and what alignment.json records of it; head=best
    reads an AER run's result (its scores and file are recorded too)."""
    a = cfg.alignment
    if str(a.head) != "best":
        given = {k: a[k] for k in ("layer", "head", "direction") if a[k] is not None}  # null: the checkpoint's default
        pol = model.policy(given | {"rows": a.rows, "signal": a.signal, "drop": list(a.drop or [])})
        return pol, pol.to_dict()
    aer_file = Path(a.aer_file) if a.aer_file else best_file(cfg, model.paths)
    if not aer_file.is_file():
        raise UserError(
            f"alignment.head=best needs {aer_file}: "
            "run qkvmt align gold_dir=... with this checkpoint first, or set alignment.aer_file"
        )
    best, c = json.loads(aer_file.read_text())["best"], model.transformer.cfg
    if best["layer"] >= c.decoder_layers or (best["head"] != "mean" and best["head"] >= c.n_heads):
        raise UserError(
            f"{aer_file} was made for another model (its best is layer {best['layer']}, head {best['head']})"
        )
    fields = {k: best[k] for k in ("layer", "head", "rows", "direction")}
    # Results from before signals read the weights, from before drop none.
    pol = model.policy(fields | {"signal": best.get("signal", "weights"), "drop": best.get("drop", [])})
    return pol, best | {"from": str(aer_file)}


def training_pairs_of(ckpt: Path) -> tuple[list[str], list[str]]:
    """The training pairs of a checkpoint's run (its data source and data.extra_train), read
    again through the data configuration its run.json records."""
    data = run_data(ckpt)
    if data is None:
        record = run_folder(ckpt) / "run.json"
        raise UserError(
            f"reference_aligner needs the run's training data, recorded in {record} by qkvmt train, "
            "which is missing or older: use a checkpoint inside its training run folder"
        )
    return instantiate(OmegaConf.create(data)).training_pairs()
