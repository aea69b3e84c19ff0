"""What `Model.run_with_cache` returns: the activations of a forced pass by name, with the tokens
that label their axes, as numpy arrays and as files.

    cache = model.run_with_cache("Ein Mann fährt .", names="decoder.*.cross.weights")
    cache["decoder.1.cross.weights"]          # (batch, head, query, key), a tensor
    cache.labels("decoder.1.cross.weights")   # {axis: labels}: query by output token, key by source token
    cache.filter("decoder.1.*")               # the names a glob matches
    cache.save("cache")                       # cache.npz (one array per name) and cache.json (axes, tokens)

A decoder position is labelled by the token it predicts, as every map of qkvmt labels its rows;
a decoder self-attention key by the token it reads (<s> first).
"""

import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from qkvmt.errors import UserError
from qkvmt.files import write_json, write_text
from qkvmt.model.hook_names import glob_matches, is_glob
from qkvmt.results.html import page, texts_html
from qkvmt.results.result import Result


class Cache(Result):
    def __init__(
        self,
        activations: dict[str, Tensor],
        axes: dict[str, tuple[str, ...]],
        sides: dict[str, dict[str, str]],
        source_tokens: list[list[str]],
        target_tokens: list[list[str]],
        output_tokens: list[list[str]],
        sources: list[str],
    ):
        self.activations, self.axes, self.sides = activations, axes, sides
        self.source_tokens, self.target_tokens, self.output_tokens = source_tokens, target_tokens, output_tokens
        self.sources = sources

    @classmethod
    def of(cls, named, sources: list[str]) -> "Cache":
        """The cache of a qkvmt.analysis.named_pass.NamedPass of `sources`."""
        return cls(
            named.activations,
            named.axes,
            named.sides,
            named.source_tokens,
            named.target_tokens,
            named.output_tokens,
            sources,
        )

    @property
    def names(self) -> list[str]:
        return list(self.activations)

    def __len__(self) -> int:
        return len(self.activations)

    def __iter__(self):
        return iter(self.activations)

    def __contains__(self, name) -> bool:
        return name in self.activations

    def items(self):
        return self.activations.items()

    def __getitem__(self, name: str) -> Tensor:
        if name not in self.activations:
            if isinstance(name, str) and is_glob(name):
                raise UserError(f"cache[{name!r}]: a glob stands for many names; cache.filter({name!r}) keeps them")
            raise UserError(
                f"cache[{name!r}]: not in this cache; it holds {', '.join(self.names[:6])}"
                + (f" and {len(self) - 6} more" if len(self) > 6 else "")
                + " (give run_with_cache names= to keep others)"
            )
        return self.activations[name]

    def filter(self, pattern: str) -> "Cache":
        """The names `pattern` (a name or glob, qkvmt.model.hook_names) matches, as a Cache."""
        kept = [n for n in self.names if glob_matches(pattern, n)]
        if not kept:
            raise UserError(f"{pattern!r} matches nothing in this cache of {len(self)} activations")
        return Cache(
            {n: self.activations[n] for n in kept},
            {n: self.axes[n] for n in kept},
            {n: self.sides[n] for n in kept},
            self.source_tokens,
            self.target_tokens,
            self.output_tokens,
            self.sources,
        )

    def labels(self, name: str) -> dict[str, list | None]:
        """Each axis of `name` -> its labels: batch the sources, head its numbers, a position axis each
        sentence's tokens (a list per sentence), a feature axis None."""
        t, sides = self[name], self.sides[name]
        out: dict[str, list | None] = {}
        for i, axis in enumerate(self.axes[name]):
            side = sides.get(axis)
            if axis == "batch":
                out[axis] = list(self.sources)
            elif axis == "head":
                out[axis] = list(range(t.size(i)))
            elif side == "source":
                out[axis] = self.source_tokens
            elif side == "target":
                out[axis] = self.target_tokens if axis == "key" else self.output_tokens
            else:
                out[axis] = None
        return out

    def numpy(self) -> dict[str, np.ndarray]:
        """Each activation as a numpy array (float32, or bool for masks)."""
        return {n: (t.float() if t.is_floating_point() else t).cpu().numpy() for n, t in self.items()}

    def to_dict(self) -> dict:
        """Everything but the arrays: each name's axes and shape, and the tokens."""
        return {
            "activations": {
                n: {"axes": list(self.axes[n]), "shape": list(t.shape), "sides": self.sides[n]} for n, t in self.items()
            },
            "sources": self.sources,
            "source_tokens": self.source_tokens,
            "target_tokens": self.target_tokens,
            "output_tokens": self.output_tokens,
        }

    @classmethod
    def load(cls, folder) -> "Cache":
        """A cache saved by `save(folder)`."""
        folder = Path(folder)
        meta = json.loads((folder / "cache.json").read_text(encoding="utf-8"))
        with np.load(folder / "cache.npz") as arrays:
            tensors = {n: torch.from_numpy(arrays[n]) for n in meta["activations"]}
        acts = meta["activations"]
        return cls(
            tensors,
            {n: tuple(a["axes"]) for n, a in acts.items()},
            {n: a["sides"] for n, a in acts.items()},
            meta["source_tokens"],
            meta["target_tokens"],
            meta["output_tokens"],
            meta["sources"],
        )

    def html(self) -> str:
        rows = [(n, f"{' × '.join(map(str, t.shape))}  ({', '.join(self.axes[n])})") for n, t in self.items()]
        return page("Activations", texts_html([("sources", " | ".join(self.sources)), *rows]), {"page": "text"})

    def files(self) -> dict:
        return {
            "cache.npz": lambda path: _save_npz(Path(path), self.numpy()),
            "cache.json": lambda path: write_json(Path(path), self.to_dict()),
            "cache.html": lambda path: write_text(Path(path), self.html()),
        }


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:  # a file object: np.savez would add .npz to a name without it
        np.savez(f, **arrays)
