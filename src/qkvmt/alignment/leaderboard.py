"""The search for the best way to read word links from a model, scored against gold links: every
candidate extraction (signal × decoder layer × head or the head average × rows × direction, and
each also without the signal's sinks where it names some, qkvmt.alignment.policy) links each gold
pair, each is scored by AER on the test pairs, the best is chosen on the dev pairs (without any,
on the test pairs), and the leaderboard lists them all beside a statistical reference aligner's
row. `Model.aer` runs it (qkvmt.studies.aer), and `qkvmt align gold_dir=` through it."""

from dataclasses import dataclass, field

import numpy as np

from qkvmt.alignment.links import GoldAlignments, alignment_scores, pair_word_groups
from qkvmt.alignment.policy import DIRECTIONS, ROWS, AligningModel, AlignmentPolicy, links_in_every_direction
from qkvmt.alignment.reference import reference_aligner, with_gold
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.analysis.forced import forced_attention
from qkvmt.analysis.signals import SIGNALS
from qkvmt.errors import UserError

FIELDS = ("signal", "layer", "head", "rows", "direction", "drop")  # a candidate's key, in this order


@dataclass
class Candidates:
    """Every candidate's links on the gold pairs that fit the model."""

    shapes: dict = field(default_factory=dict)  # signal -> (its layers, its heads, 0 where it has none per head)
    links: dict = field(default_factory=dict)  # (signal, layer, head, rows, direction, drop) -> each kept pair's links
    kept: list[int] = field(default_factory=list)  # the gold pairs that fit, by position in the gold set
    skipped: int = 0  # the pairs longer than the model's positions

    def heads_of(self, signal: str) -> list:
        return [*range(self.shapes[signal][1]), "mean"]

    def add(self, signal: str, cross, src_groups: list, tgt_groups: list) -> None:
        """One pair's links by every candidate reading the signal's cross-attention map."""
        # A signal's layers and heads are known from the first pair: the same for every pair.
        n_layers, n_heads = self.shapes.setdefault(
            signal, (len(cross.layers), 0 if cross.weights is None else cross.weights.shape[1])
        )
        for li in range(n_layers):
            for h in [*range(n_heads), "mean"]:
                for r in ROWS:
                    for drop in dict.fromkeys([(), SIGNALS[signal].sinks]):  # the sinks' too, as the signal says
                        m = AlignmentPolicy(li, h, r, signal=signal, drop=drop).word_matrix(
                            cross, tgt_groups, src_groups
                        )
                        for d, links in links_in_every_direction(m).items():
                            self.links.setdefault((signal, li, h, r, d, drop), []).append(links)


def candidate_links(model: AligningModel, gold: GoldAlignments, signals: list[str]) -> Candidates:
    """Every candidate's links on each gold pair, from one forced pass of the pair reading every
    signal."""
    found = Candidates()
    for k, (src, tgt) in enumerate(zip(gold.src, gold.tgt)):
        sa = forced_attention(
            model.transformer, model.tokenizer, src, tgt, model.meta.full_context_layer, analyses=set(signals)
        )
        groups = pair_word_groups(sa.src_tokens, sa.out_tokens, src, tgt)
        if groups is None:
            found.skipped += 1  # longer than the model's positions: cut, so words no longer line up
            continue
        found.kept.append(k)
        for s in signals:
            found.add(s, sa.for_alignment.map("cross", s), *groups)
    return found


def checked_gold_dev(n_dev, n_pairs: int) -> int:
    """gold_dev, checked against the gold set's size before the slow part."""
    if isinstance(n_dev, bool) or not isinstance(n_dev, int) or not 0 <= n_dev < n_pairs:
        raise UserError(
            f"gold_dev={n_dev!r}: give how many of the {n_pairs} gold pairs, from the first, choose the "
            "best extraction (0: none), fewer than all: the rest are the test"
        )
    return n_dev


@dataclass
class GoldSplit:
    """The kept gold pairs' links, and which of them choose the best extraction (dev) and which
    every reported figure is scored on (test), as positions in `kept`."""

    kept: list[int]
    sure: list
    possible: list
    dev: list[int]
    test: list[int]


def split_gold(gold: GoldAlignments, kept: list[int], n_dev: int) -> GoldSplit:
    """The first n_dev gold pairs choose the best extraction and every figure reported comes from
    the rest, which chose nothing; a part left empty by the pairs that did not fit is an error."""
    dev = [i for i, k in enumerate(kept) if k < n_dev]
    test = [i for i, k in enumerate(kept) if k >= n_dev]
    if not test or (n_dev and not dev):
        raise UserError(
            f"gold_dev={n_dev}: of the pairs that fit the model, none is left for the "
            f"{'test' if not test else 'dev'} part; choose another split"
        )
    return GoldSplit(kept, [gold.sure[k] for k in kept], [gold.possible[k] for k in kept], dev, test)


def scored(hyp: list, sure: list, possible: list, positions: list[int]) -> dict:
    """alignment_scores over the pairs at `positions`."""
    return alignment_scores([hyp[i] for i in positions], [sure[i] for i in positions], [possible[i] for i in positions])


@dataclass
class Leaderboard:
    """Every candidate's scores on the test pairs (`table`) and on the pairs that choose the best
    (`chooser`: the dev pairs, or without any the test pairs themselves)."""

    found: Candidates
    table: dict
    chooser: dict
    on_dev: bool  # whether dev pairs chose

    @classmethod
    def scored(cls, found: Candidates, split: GoldSplit) -> "Leaderboard":
        table = {key: scored(a, split.sure, split.possible, split.test) for key, a in found.links.items()}
        if not split.dev:
            return cls(found, table, table, False)
        chooser = {key: scored(a, split.sure, split.possible, split.dev) for key, a in found.links.items()}
        return cls(found, table, chooser, True)

    def row(self, key: tuple) -> dict:
        """A candidate as a result lists it: its fields, its test scores, and its dev AER where dev pairs chose."""
        return (
            dict(zip(FIELDS, key))
            | {"drop": list(key[-1])}
            | self.table[key]
            | ({"dev_aer": self.chooser[key]["aer"]} if self.on_dev else {})
        )

    def best(self) -> dict:
        return self.row(min(self.chooser, key=lambda key: self.chooser[key]["aer"]))

    def layers(self, signal: str) -> dict:
        """One signal's test scores, all columns kept: layerL -> headH or mean -> rows -> direction -> scores."""
        return {
            f"layer{li}": {
                f"head{h}" if h != "mean" else "mean": {
                    r: {d: self.table[signal, li, h, r, d, ()] for d in DIRECTIONS} for r in ROWS
                }
                for h in self.found.heads_of(signal)
            }
            for li in range(self.found.shapes[signal][0])
        }

    def grid(self, best: dict) -> np.ndarray:
        """AER at each layer (rows) and head (columns, the average last) of best's signal, rows, direction and drop."""
        signal, rest = best["signal"], (best["rows"], best["direction"], tuple(best["drop"]))
        return np.array(
            [
                [self.table[(signal, li, h, *rest)]["aer"] for h in self.found.heads_of(signal)]
                for li in range(self.found.shapes[signal][0])
            ]
        )

    def rows(self, reference: dict | None) -> list[dict]:
        """Every candidate, and the reference aligner's row where there is one, best first as chosen."""
        rows = [self.row(key) for key in self.table]
        if reference:
            scores = {k: reference[k] for k in self.best() if k in reference}
            rows.append(
                dict.fromkeys(FIELDS) | {"signal": f"{reference['aligner']} ({reference['symmetrization']})"} | scores
            )
        return sorted(rows, key=lambda row: row["dev_aer" if self.on_dev else "aer"])


def reference_scores(
    name: str, symmetrization: str, training: tuple[list[str], list[str]], gold, split: GoldSplit, langs
) -> dict:
    """AER of the statistical aligner `name` on the gold pairs the attention was scored on (the
    test part; dev apart), having learned from the training pairs plus the gold sentences (never
    their links), each once."""
    src, tgt, positions = with_gold(*training, [gold.src[k] for k in split.kept], [gold.tgt[k] for k in split.kept])
    aligner = reference_aligner(name, symmetrization, "reference_aligner")
    forward, reverse = aligner.directional(src, tgt, langs)
    forward, reverse = [forward[k] for k in positions], [reverse[k] for k in positions]
    links = {"forward": forward, "reverse": reverse}
    links |= {method: [symmetrize(f, r, method) for f, r in zip(forward, reverse)] for method in METHODS}
    variants = {method: scored(a, split.sure, split.possible, split.test) for method, a in links.items()}
    dev = {"dev_aer": scored(links[symmetrization], split.sure, split.possible, split.dev)["aer"]} if split.dev else {}
    return {
        "aligner": name,
        "symmetrization": symmetrization,
        **variants[symmetrization],
        **dev,
        "training_pairs": len(training[0]),
        "gold_pairs_in_training": sum(k < len(training[0]) for k in positions),
        "variants": variants,
    }
