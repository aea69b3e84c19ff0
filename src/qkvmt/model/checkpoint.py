"""Self-contained checkpoints: their typed metadata, the checks a loaded one passes, and the
Transformer rebuilt from the file alone (qkvmt.loading opens one from a path or a name).

A checkpoint holds plain data only (tensors, dicts, strings, numbers), so it is read with
`torch.load(weights_only=True)`, which refuses to run pickled code.
"""

import pickle
import re
import warnings
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

import torch

from qkvmt.errors import UserError
from qkvmt.model.config import ModelConfig
from qkvmt.model.finite import non_finite
from qkvmt.model.transformer import Transformer

USE_ANOTHER = "use a checkpoint written by qkvmt train or qkvmt average"


@dataclass(frozen=True)
class CheckpointMeta:
    """What a checkpoint says about itself. The file holds it as the plain dict
    ckpt["qkvmt"] (`to_dict`), so it loads with weights_only=True; code reads it typed."""

    model_config: dict  # ModelConfig.to_dict(); ModelConfig.from_dict fills what older files lack
    tokenizer: str  # the run's joint BPE, as JSON
    src_lang: str
    tgt_lang: str
    decode: dict = field(default_factory=dict)  # the run's test decoding settings (DecodeConfig's fields)
    alignment: dict | None = None  # the supervised head (AlignmentSupervision.to_dict()), if trained with one
    averaged_from: list[str] | None = None  # the files an averaged checkpoint was made from
    hf_folder: str | None = None  # a Hugging Face folder it was imported from (qkvmt.hf): its files are the tokenizer
    # A model fine-tuned from such a folder: the folder's tokenizer files, name -> base64 (qkvmt.hf.tokenizer_files)
    tokenizer_files: dict | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "CheckpointMeta":
        """Keys a later version may add are ignored, so a newer checkpoint still loads."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def settings(self) -> dict:
        """model_config with every setting added since the file was written at its default, so
        two checkpoints of the same model compare equal whichever version wrote them."""
        return {f.name: f.default for f in fields(ModelConfig) if f.default is not MISSING} | self.model_config

    @property
    def full_context_layer(self) -> int | None:
        """The decoder layer whose supervised head must be read without the causal mask (it
        was trained with full context), else None."""
        sup = self.alignment
        return sup["layer"] if sup and sup.get("full_context") else None


# What inference needs of ckpt["qkvmt"], and the type each must have.
REQUIRED = {f.name: f.type for f in fields(CheckpointMeta) if f.default is MISSING and f.default_factory is MISSING}


def checked(ckpt, path: Path) -> dict:
    """`ckpt` if it holds what inference needs, else a UserError naming what it lacks."""
    meta = ckpt.get("qkvmt") if isinstance(ckpt, dict) else None
    bad = [k for k, kind in REQUIRED.items() if not isinstance(meta, dict) or not isinstance(meta.get(k), kind)]
    if bad or not isinstance(ckpt.get("state_dict"), dict):
        what = (
            f"no {', '.join(bad)} in its metadata" if isinstance(meta, dict) and bad else "no qkvmt metadata or weights"
        )
        raise UserError(f"{path} is not a qkvmt checkpoint ({what}); {USE_ANOTHER}")
    return ckpt


def load_plain(path: Path, what: str, advice: str, mmap: bool = False):
    """What torch.load(weights_only=True) reads from `path`, which never runs pickled code; a UserError
    naming `path` when it holds code (refused, not run) or is not readable as `what`, ending with `advice`."""
    try:
        with warnings.catch_warnings():
            # An unusual pickle protocol only means the load below fails, which is reported.
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except Exception as e:  # arbitrary bytes make torch.load fail in many ways (KeyError, EOFError, ...)
        if isinstance(e, pickle.UnpicklingError) and "GLOBAL" in str(e):  # an import: code, not data
            raise UserError(
                f"{path} holds code or objects that are not plain data; refusing to load it ({brief(e)}); {advice}"
            ) from None
        raise UserError(f"{path} is not a readable {what} (truncated or corrupt?): {brief(e)}; {advice}") from None


# A terminal's control sequence (torch marks words bold in its messages): printed, it would change the terminal.
ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def brief(e: Exception) -> str:
    """One line about a loading error: torch's messages run over several lines and sentences."""
    lines = [line.strip() for line in ESCAPE.sub("", str(e)).splitlines() if line.strip()]
    key = next((line for line in lines if "GLOBAL" in line or "Unsupported" in line), lines[0] if lines else "")
    return f"{type(e).__name__}: {key.split('. ')[0]}" if key else type(e).__name__


def model_weights(ckpt: dict) -> dict:
    """The Transformer's own weights, without the LightningModule's `model.` prefix."""
    return {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}


def checked_model(ckpt: dict, path) -> Transformer:
    """The Transformer of the configuration stored in `ckpt`, holding its weights, checked: the
    configuration is usable, the weights are the ones it makes (names and shapes), and every one
    is finite. Its parameters are the checkpoint's own tensors (Transformer.from_weights), so
    checking costs no second copy. Whatever takes a checkpoint's weights (build_model, init_from)
    checks them here, so a file that would load into the wrong shapes, or translate NaN into empty
    lines, is one line."""
    meta = CheckpointMeta.from_dict(ckpt["qkvmt"])
    try:
        cfg = ModelConfig.from_dict(meta.model_config)
        with torch.device("meta"):  # settings the blocks cannot build fail here, before any weight is read
            expected = Transformer(cfg).state_dict()
    except (TypeError, ValueError, RuntimeError) as e:  # unknown, missing or impossible settings
        raise UserError(
            f"{path}: the model configuration stored in it is not usable ({brief(e)}); {USE_ANOTHER}"
        ) from None
    weights = model_weights(ckpt)
    try:
        model = Transformer.from_weights(cfg, weights)
    except RuntimeError as e:
        raise UserError(
            f"{path}: the weights do not fit the model configuration stored with them "
            f"({_mismatch(expected, weights) or brief(e)}); "
            f"it was edited or belongs to another model; {USE_ANOTHER}"
        ) from None
    bad = non_finite(weights)
    if bad:
        name, n = next(iter(bad.items()))  # the first, in the model's order
        raise UserError(
            f"{path}: weight {name} holds NaN or infinity ({n} values): the file is corrupt, or was saved "
            f"from a run that diverged; {USE_ANOTHER}"
        )
    return model


def _mismatch(expected: dict, found: dict) -> str:
    """The first weight that is missing, extra or of another shape than the model expects ("" if none)."""
    for name, tensor in expected.items():
        if name not in found:
            return f"no weight {name}"
        shape = tuple(getattr(found[name], "shape", ()))
        if shape != tuple(tensor.shape):
            return f"{name} is {shape}, but the stored configuration needs {tuple(tensor.shape)}"
    extra = sorted(set(found) - set(expected))
    return f"unexpected weight {extra[0]}" if extra else ""


def check_same_model(stored: dict, model_config: dict, what: str, advice: str, may_differ=()) -> None:
    """A UserError naming every model setting (but those from the tokenizer, and `may_differ`)
    on which `stored` differs from what the run asks for."""
    from_tokenizer = ("vocab_size", "tgt_vocab_size", "pad_id", "bos_id", "eos_id")
    skip = (*from_tokenizer, *may_differ)
    differ = [k for k in model_config if k not in skip and stored.get(k) != model_config[k]]
    if differ:
        raise UserError(
            f"{what} holds a model with "
            + ", ".join(f"model.{k}={stored.get(k)}" for k in differ)
            + " but this run asks for "
            + ", ".join(f"model.{k}={model_config[k]}" for k in differ)
            + f": {advice}"
        )


def last_n(spec: str) -> int | None:
    """N of "lastN" (N > 0), else None."""
    spec = str(spec)
    return int(spec[4:]) if spec.startswith("last") and spec[4:].isdigit() and int(spec[4:]) > 0 else None


def checkpoint_step(path: Path) -> int:
    """The global step a checkpoint was saved at; memory-mapped, so no weights are read."""
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)["global_step"]


def recent_checkpoints(folder: Path, n: int) -> list[Path]:
    """The (at most) n most recent step*.ckpt files a run's validations wrote, oldest first."""
    return sorted(Path(folder).glob("step*.ckpt"))[-n:]  # zero-padded step numbers sort in order
