"""init_from: a training run that starts from a trained model's weights (fine-tuning).

As fairseq's --finetune-from-model and OpenNMT-py's train_from with reset_optim all: the
weights and the tokenizer are the model's; the optimizer, the lr schedule and the step count
start afresh, so the recipe's schedule (warmup, then its decay over max_time or max_steps)
runs again. A bundled model's name works as well as a checkpoint or a model folder, so a
bundled model can be taught an alignment head (module.alignment) without training from zero.
"""

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from qkvmt.bundled import bundled_names, resolve
from qkvmt.errors import UserError
from qkvmt.model.checkpoint import CheckpointMeta, check_same_model, checked_model, load_checkpoint, model_weights
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
        return Tokenizer.from_str(self.meta.tokenizer)

    def load_into(self, model) -> None:
        """Its weights into the run's freshly built model (float32, whatever they were stored in)."""
        model.load_state_dict(model_weights(self.ckpt))

    def record(self) -> dict:
        """What run.json keeps: the model as given, its file, and how it was made where it says
        (a bundled model's provenance), so the run's own provenance stays whole when that
        model is later replaced."""
        return {"spec": self.spec, "path": str(self.path), "provenance": self.ckpt["qkvmt"].get("provenance")}


def starting_point(spec, wanted: ModelConfig, src_lang: str, tgt_lang: str) -> Start | None:
    """The model named by init_from (null: none), checked against the run's model and language
    pair before anything is written."""
    if spec is None or str(spec) == "":
        return None
    spec = str(spec)
    path = resolve(spec)
    if path.is_dir() and not is_weights_folder(path):
        held = "an empty folder" if not any(path.iterdir()) else f"a folder without {', '.join(missing_files(path))}"
        raise UserError(
            f"init_from={spec}: {path} is {held}: give a model folder (model.safetensors, tokenizer.json and "
            "qkvmt.json, as qkvmt export format=safetensors writes it), a .ckpt file such as a run's "
            "checkpoints/best.ckpt, or a bundled model's name"
        )
    if not path.exists():
        raise UserError(
            f"init_from={spec}: no checkpoint, model folder or bundled model of that name "
            f"({', '.join(bundled_names()) or 'none installed'}); give a .ckpt file, a model folder or a bundled name"
        )
    start = Start(spec, path, load_checkpoint(path))
    # as translate checks them: the weights fit the model's own settings, and are finite
    checked_model(start.ckpt, path, device="meta")
    meta = start.meta
    if (meta.src_lang, meta.tgt_lang) != (src_lang, tgt_lang):
        raise UserError(
            f"init_from={spec} translates {meta.src_lang}->{meta.tgt_lang}, but this run's data is "
            f"{src_lang}->{tgt_lang}: set data.src_lang and data.tgt_lang to its pair, or start from a model of "
            "this pair"
        )
    check_same_model(
        meta.settings,
        wanted.to_dict(),
        f"init_from={spec}",
        "set those model settings as it has them (a run continues its architecture; only dropout may differ)",
        may_differ=MAY_DIFFER,
    )
    return start
