"""A Hugging Face model's weights under qkvmt's names, each checked against the ModelConfig it must fit.

Where each of our layers sits in their files is qkvmt.hf.names's table, which the export writes by.
Weights that do not fit, hold NaN or infinity, are missing or are left over (a module qkvmt has no place for) are a
UserError naming the tensor, before anything runs.
"""

import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor

from qkvmt.errors import UserError
from qkvmt.hf.json_files import read_json, shown
from qkvmt.hf.names import (
    ATTENTION,
    DECODER_EMBED,
    ENCODER_EMBED,
    OUTPUT,
    OUTPUT_BIAS,
    REBUILT,
    SHARED,
    layer_names,
    projections,
)
from qkvmt.hf.safetensors_file import SafetensorsFile
from qkvmt.model.checkpoint import load_plain
from qkvmt.model.config import ModelConfig
from qkvmt.model.finite import non_finite
from qkvmt.model.transformer import Transformer

SAFETENSORS, BIN = "model.safetensors", "pytorch_model.bin"
WEIGHT_FILES = (SAFETENSORS, f"{SAFETENSORS}.index.json", BIN, f"{BIN}.index.json")


def weight_file(folder: Path) -> Path | None:
    """The folder's weights (one file, or the index of shards), safetensors first, else None."""
    return next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)


class Tensors(Mapping):
    """The tensors of a safetensors or pytorch_model.bin file, or of the shards an .index.json lists, by
    name, each read from its file when asked for, straight into the memory that keeps it (`read_into`): an
    import holds the weights it has made and the one it is reading, never a second copy of the file."""

    def __init__(self, path: Path):
        self.handles: dict[Path, object] = {}
        if path.name.endswith(".index.json"):
            self.files = shards(path)
        else:
            self.files = dict.fromkeys(self.handle(path).keys(), path)

    def handle(self, file: Path):
        if file not in self.handles:
            if file.suffix == ".safetensors":
                self.handles[file] = SafetensorsFile(file)
            else:  # plain tensors only, never pickled code; mapped, where the format allows it (not the legacy one)
                advice = "use a folder whose weights are model.safetensors"
                self.handles[file] = load_plain(file, "weights file", advice, mmap=zipfile.is_zipfile(file))
        return self.handles[file]

    def meta(self, name: str) -> Tensor:
        """The tensor's dtype and shape, without reading its values where the format allows it."""
        h = self.handle(self.files[name])
        return h.meta(name) if isinstance(h, SafetensorsFile) else h[name]

    def read_into(self, name: str, out: Tensor) -> None:
        """Fills `out` (contiguous, as many values) with the tensor's, converted to out's dtype."""
        h = self.handle(self.files[name])
        if isinstance(h, SafetensorsFile):
            h.read_into(name, out)
        else:
            out.copy_(h[name].reshape(out.shape))

    def __getitem__(self, name: str) -> Tensor:
        h = self.handle(self.files[name])
        return h.read(name) if isinstance(h, SafetensorsFile) else h[name]

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


def shards(index: Path) -> dict[str, Path]:
    """The file of each tensor that the shard index `index` (model.safetensors.index.json) names: each a file of
    the index's own folder, never a path out of it, which would read whatever file it names."""
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise UserError(f"{index}: weight_map={shown(weight_map)} is not an object of tensor names and shard files")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or shard in ("", ".", "..") or Path(shard).name != shard:
            raise UserError(f"{index}: {name} is in {shown(shard)}, which is not a file name in {index.parent}")
        if not (index.parent / shard).is_file():
            raise UserError(f"{index}: {name} is in {shard}, which is not in the folder; download the folder whole")
    return {name: index.parent / shard for name, shard in weight_map.items()}


class Renamed:
    """The tensors of the weights file `where` under our Transformer's names (float32) as `out`, each read
    once, checked for its shape and for NaN or infinity as it is read; `used` names the file's tensors read."""

    def __init__(self, tensors: Tensors, cfg: ModelConfig, where: Path):
        prefixed = ("model.", "lm_head", "final_logits_bias")
        self.held = {k if k.startswith(prefixed) else f"model.{k}": k for k in tensors}  # one prefix -> the file's
        with torch.device("meta"):  # the shapes the config needs, without allocating a model
            self.expected = Transformer(cfg).state_dict()
        self.tensors, self.where = tensors, where
        self.out: dict[str, Tensor] = {}
        self.used: set[str] = set()

    def take(self, ours: str, *names: str, optional: bool = False) -> None:
        """ours = the first of `names` the file holds; several `names` joined by "+" are stacked row-wise."""
        for name in names:
            parts = name.split("+")
            if all(p in self.held for p in parts):
                want = self.expected[ours]
                rows = want.size(0) // len(parts)
                out = torch.empty_like(want, device="cpu")  # the parameter itself (from_weights takes it)
                for p, block in zip(parts, out.split(rows)):  # each part read straight into its rows
                    check(self.tensors.meta(self.held[p]), p, block.shape, self.where)
                    self.tensors.read_into(self.held[p], block)
                    if non_finite({p: block}):  # named as the folder names it
                        raise UserError(f"{self.where}: {p} holds NaN or infinity")
                    self.used.add(p)
                self.out[ours] = out
                return
        if not optional:
            raise UserError(
                f"{self.where}: no weight {names[0]}; the file does not hold a whole model of its config.json"
            )

    def linear(self, ours: str, theirs: str) -> None:
        for kind in ("weight", "bias"):
            self.take(f"{ours}.{kind}", f"{theirs}.{kind}")

    def attention(self, ours: str, theirs: str) -> None:
        for kind in ("weight", "bias"):
            self.take(f"{ours}.w_qkv.{kind}", "+".join(f"{name}.{kind}" for name in projections(theirs)))
        self.linear(f"{ours}.w_o", f"{theirs}.out_proj")


LAYER = re.compile(r"(?:^|\.)(encoder|decoder)\.layers\.(\d+)\.")


def check_layer_counts(names, cfg: ModelConfig, where: Path, config: Path) -> None:
    """config.json's encoder_layers and decoder_layers against the layers the weights file `where` holds
    (`names`), before a model of that many layers is built: a config.json may ask for a million."""
    held = {"encoder": 0, "decoder": 0}
    for m in filter(None, map(LAYER.search, names)):
        held[m.group(1)] = max(held[m.group(1)], int(m.group(2)) + 1)
    for stack, n in held.items():
        given = getattr(cfg, f"{stack}_layers")
        if given != n:
            raise UserError(f"{config}: {stack}_layers={given}, but {where} holds {n} {stack} layers")


def state_dict(tensors: Tensors, cfg: ModelConfig, where: Path) -> dict[str, Tensor]:
    """Our Transformer's state dict (float32) from the tensors of the weights file `where`, each read once
    (twice for a tied copy, compared), checked for its shape and for NaN or infinity as it is read."""
    r = Renamed(tensors, cfg, where)
    embeddings(r, cfg)
    for ours, theirs, kind in layer_names(cfg):
        (r.attention if kind == ATTENTION else r.linear)(ours, theirs)
    tied = check_tied_copies(r, cfg)
    unused = {SHARED} if not cfg.tie_embeddings else set()  # `shared` is unused when the embeddings are untied
    left = sorted(set(r.held) - r.used - set(tied) - set(REBUILT) - unused)
    if left:
        raise UserError(f"{where}: weight {left[0]} has no place in qkvmt's blocks; it belongs to another architecture")
    return r.out


def embeddings(r: Renamed, cfg: ModelConfig) -> None:
    """The token embeddings and the output layer; tied matrices are one tensor under each of our names, as
    Transformer's own state dict holds them."""
    if cfg.tie_embeddings:
        r.take("src_embed.tokens.weight", SHARED, ENCODER_EMBED)
    else:  # transformers 5 unties them from `shared` along with the output; older files hold all three alike
        r.take("src_embed.tokens.weight", ENCODER_EMBED, SHARED)
        r.take("tgt_embed.tokens.weight", DECODER_EMBED, SHARED)
    if not cfg.output_tied:
        r.take("output.weight", OUTPUT)
    if cfg.tie_embeddings:
        r.out["tgt_embed.tokens.weight"] = r.out["src_embed.tokens.weight"]
    if cfg.output_tied:
        r.out["output.weight"] = r.out["tgt_embed.tokens.weight"]
    if cfg.output_bias:  # transformers fills a missing final_logits_bias with zeros, so may we
        r.take("output.bias", OUTPUT_BIAS, optional=True)
        r.out.setdefault("output.bias", torch.zeros(cfg.target_vocab_size))


def check_tied_copies(r: Renamed, cfg: ModelConfig) -> dict[str, str]:
    """Copies of a tied matrix that the file holds beside the one read must be that matrix: the file's
    names of such copies -> ours."""
    tied = {ENCODER_EMBED: "src_embed.tokens.weight", DECODER_EMBED: "src_embed.tokens.weight"}
    tied = tied if cfg.tie_embeddings else {}
    tied |= {OUTPUT: "output.weight"} if cfg.output_tied else {}
    for name, ours in tied.items():
        if name in r.held and not torch.equal(r.tensors[r.held[name]].float(), r.out[ours]):
            raise UserError(f"{r.where}: {name} differs from the matrix config.json ties it to (tie_word_embeddings)")
    return tied


def check(t: Tensor, name: str, shape: tuple, where: Path) -> None:
    """A UserError naming `name` unless the tensor has `shape` (a (1, V) bias counts as (V,)) and holds numbers
    with a fraction: whole numbers would load as floats, each weight rounded, and translate without a word."""
    if tuple(t.shape) != tuple(shape) and not (t.dim() == 2 and t.size(0) == 1 and (t.size(1),) == tuple(shape)):
        raise UserError(f"{where}: {name} is {tuple(t.shape)}, but config.json needs {tuple(shape)}")
    if not t.is_floating_point():
        raise UserError(f"{where}: {name} holds {t.dtype} values; a model's weights are floating point")
