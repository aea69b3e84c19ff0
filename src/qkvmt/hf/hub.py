"""`hf:ORG/NAME`: a model on the Hugging Face Hub, as the folder huggingface_hub keeps it in its cache.

A cached model opens without the network; one not cached is fetched where there is a network (only the
files qkvmt reads: config, weights, tokenizer). Offline, or without huggingface_hub, it is a one-line
UserError saying how to give the folder itself.
"""

from pathlib import Path

from qkvmt.errors import UserError, optional_import
from qkvmt.hf.tokenizer_files import TOKENIZER_FILES

PREFIX = "hf:"
# What qkvmt.hf reads of a model folder; a repository's other weights (TensorFlow, Flax, ONNX) stay on the hub.
FILES = ["config.json", "generation_config.json", "model.safetensors*", "pytorch_model.bin*", *TOKENIZER_FILES]


def hub_folder(name: str) -> Path:
    """The cached folder of the hub model `name` (ORG/NAME), fetched first if there is a network."""
    local = "or give the model's folder itself (ckpt_path=/path/to/folder with config.json)"
    hub = optional_import("huggingface_hub", f"pip install huggingface_hub (or '.[hf]') for hf:{name}, {local}")
    if not name or name.count("/") != 1:
        raise UserError(f"{PREFIX}{name}: name a hub model as {PREFIX}ORG/NAME, {local}")
    try:
        return Path(hub.snapshot_download(name, allow_patterns=FILES, local_files_only=True))
    except Exception:  # not in the cache (huggingface_hub raises its own errors for it)
        if hub.constants.HF_HUB_OFFLINE:
            raise UserError(
                f"{PREFIX}{name} is not in huggingface_hub's cache and HF_HUB_OFFLINE is set: {local}"
            ) from None
    try:
        return Path(hub.snapshot_download(name, allow_patterns=FILES))
    except Exception as e:  # no network, no such repository, no access: each its own error type
        raise UserError(f"{PREFIX}{name} could not be fetched ({type(e).__name__}): {local}") from None
