"""init_from: a training run that starts from a trained model's weights (fine-tuning).

As fairseq's --finetune-from-model and OpenNMT-py's train_from with reset_optim all: the
weights and the tokenizer are the model's; the optimizer, the lr schedule and the step count
start afresh, so the recipe's schedule (warmup, then its decay over max_time or max_steps)
runs again. A bundled model's name works as well as a checkpoint or a model folder, so a
bundled model can be taught an alignment head (module.alignment) without training from zero.

An imported model (a Hugging Face folder, hf:ORG/NAME, or a run fine-tuned from one) keeps what the
folder made it: its architecture, vocabularies and special ids (model=init_from takes them all; a
model.* setting given must agree, but dropout), its own tokenizer, and its generation settings for the
run's validation and test decoding.
"""

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.bundled import bundled_names, resolve
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.hf.folder import is_hf_folder
from qkvmt.hf.languages import for_pair
from qkvmt.hf.tokenizer_files import as_text, from_text, open_files, read_files
from qkvmt.loading import load_checkpoint
from qkvmt.model.checkpoint import CheckpointMeta, check_same_model, checked_model, model_weights
from qkvmt.model.config import ModelConfig
from qkvmt.model.weights_folder import is_weights_folder, missing_files

# Regularization, not the weights' shapes: a fine-tuning run may set its own.
MAY_DIFFER = ("dropout", "attention_dropout", "activation_dropout")


@dataclass(frozen=True)
class Start:
    """The model a run starts from: as given (`spec`), where it is, and its checkpoint."""

    spec: str
    path: Path
    ckpt: dict

    @property
    def meta(self) -> CheckpointMeta:
        return CheckpointMeta.from_dict(self.ckpt["qkvmt"])

    def tokenizer(self) -> Tokenizer:
        return self.imported_tokenizer if self.imported else Tokenizer.from_str(self.meta.tokenizer)

    @property
    def imported(self) -> bool:
        """Whether it is a Hugging Face model (qkvmt.hf), or a run fine-tuned from one: its tokenizer is the
        folder's files, its settings the folder's."""
        return self.meta.hf_folder is not None or self.meta.tokenizer_files is not None

    @cached_property
    def tokenizer_files(self) -> dict[str, bytes]:
        """An imported model's tokenizer files, by name: read from its folder, or from the checkpoint."""
        meta = self.meta
        return from_text(meta.tokenizer_files) if meta.tokenizer_files is not None else read_files(meta.hf_folder)

    @cached_property
    def imported_tokenizer(self):
        return open_files(self.tokenizer_files, self.meta.src_lang, self.meta.tgt_lang)

    def module_settings(self, val_decode: DecodeConfig, test_decode: DecodeConfig) -> dict:
        """What an imported model's LightningModule takes beyond a run's own: the tokenizer files its
        checkpoints keep, and validation and test decoding with the model's own generation settings
        (validation keeps the run's beam size: it decodes often)."""
        decode = {k: v for k, v in self.meta.decode.items() if k not in ("max_tokens", "use_cache")}
        return {
            "tokenizer_files": as_text(self.tokenizer_files),
            "val_decode": replace(val_decode, **decode | {"beam_size": val_decode.beam_size}),
            "test_decode": replace(test_decode, **decode),
        }

    def load_into(self, model) -> None:
        """Its weights into the run's freshly built model (float32, whatever they were stored in)."""
        model.load_state_dict(model_weights(self.ckpt))

    def record(self) -> dict:
        """What run.json keeps: the model as given, its file, and how it was made where it says
        (a bundled model's provenance), so the run's own provenance stays whole when that
        model is later replaced."""
        return {"spec": self.spec, "path": str(self.path), "provenance": self.ckpt["qkvmt"].get("provenance")}


def load_start(spec) -> Start | None:
    """The model named by init_from (null: none), read; a UserError naming it when there is none."""
    if spec is None or str(spec) == "":
        return None
    spec = str(spec)
    path = resolve(spec)
    if path.is_dir() and not is_weights_folder(path) and not is_hf_folder(path):
        held = "an empty folder" if not any(path.iterdir()) else f"a folder without {', '.join(missing_files(path))}"
        raise UserError(
            f"init_from={spec}: {path} is {held}: give a model folder (model.safetensors, tokenizer.json and "
            "qkvmt.json, as qkvmt export format=safetensors writes it), a Hugging Face model's folder, a .ckpt "
            "file such as a run's checkpoints/best.ckpt, or a bundled model's name"
        )
    if not path.exists():
        raise UserError(
            f"init_from={spec}: no checkpoint, model folder or bundled model of that name "
            f"({', '.join(bundled_names()) or 'none installed'}); give a .ckpt file, a model folder, a Hugging Face "
            "folder (or hf:ORG/NAME) or a bundled name"
        )
    start = Start(spec, path, load_checkpoint(path))
    checked_model(start.ckpt, path)  # as translate checks them: they fit its settings, finite
    return start


def imported_start(start: Start, run_model: dict, dm) -> tuple[Start, ModelConfig]:
    """An imported model set to the language pair of the run's data `dm`, and its ModelConfig with the
    run's dropout. `run_model`: the model.* settings the run asks of it (pipeline.train_settings
    .asked_of_start); each must agree with the model's, but dropout. A Marian folder names no pair of
    ours: the run's data gives it; a many-to-many model is set to it (its target language forced first).
    The data's max_positions, unless set, is the model's."""
    meta, src_lang, tgt_lang = start.meta, dm.src_lang, dm.tgt_lang
    what = f"init_from={start.spec}"
    check_same_model(
        meta.settings,
        run_model,
        what,
        "leave those model.* settings out and give model=init_from, which takes each from it (only dropout may differ)",
        may_differ=MAY_DIFFER,
    )
    tok = start.tokenizer()
    own = (meta.src_lang, meta.tgt_lang)
    if all(own) and own != (src_lang, tgt_lang) and not hasattr(tok, "with_languages"):  # not many-to-many
        raise other_pair(what, meta, src_lang, tgt_lang)
    tok, meta = for_pair(tok, replace(meta, src_lang=src_lang, tgt_lang=tgt_lang), src_lang, tgt_lang)
    start = Start(start.spec, start.path, {**start.ckpt, "qkvmt": meta.to_dict()})  # opens its tokenizer at the pair
    config = ModelConfig.from_dict(meta.model_config | {k: run_model[k] for k in MAY_DIFFER if k in run_model})
    dm.max_positions = dm.max_positions or config.max_positions
    if dm.max_positions > config.max_positions:  # its position table ends there
        raise UserError(
            f"data.max_positions={dm.max_positions}, but {what} has {config.max_positions} positions: "
            "leave data.max_positions out, or set it lower"
        )
    return start, config


def check_start(start: Start, wanted: ModelConfig, src_lang: str, tgt_lang: str) -> None:
    """A model of qkvmt's own, checked against the run's model and language pair before anything is written."""
    spec, meta = start.spec, start.meta
    if (meta.src_lang, meta.tgt_lang) != (src_lang, tgt_lang):
        raise other_pair(f"init_from={spec}", meta, src_lang, tgt_lang)
    check_same_model(
        meta.settings,
        wanted.to_dict(),
        f"init_from={spec}",
        "set those model settings as it has them (a run continues its architecture; only dropout may differ)",
        may_differ=MAY_DIFFER,
    )


def other_pair(what: str, meta: CheckpointMeta, src_lang: str, tgt_lang: str) -> UserError:
    return UserError(
        f"{what} translates {meta.src_lang}->{meta.tgt_lang}, but this run's data is "
        f"{src_lang}->{tgt_lang}: set data.src_lang and data.tgt_lang to its pair, or start from a model of "
        "this pair"
    )
