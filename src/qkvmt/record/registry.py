"""The reference tables generated from the registries rather than the record: the signals
(qkvmt.analysis.signals.SIGNALS), the kinds of attention (qkvmt.analysis.trace.KINDS), the sites
an edit can read or write (qkvmt.model.sites.SITES) and the values an alignment policy accepts
(qkvmt.alignment.policy). docs/analysis.md holds them between
marker lines (qkvmt.record.pages), so a signal registered, renamed or dropped changes the page
when scripts/results.py runs, and check=true (and the docs tests) fail until it has.

Each function takes the record, as every table does, and reads nothing of it. The registries are
imported inside: they import torch, which the record's own tables do not need."""

from qkvmt.results.markdown import code, table

COST = {
    "pass": "about one forced pass",
    "passes": "many passes: left out unless named (`attention(signals=...)`, `qkvmt align leaderboard_signals=`)",
}
KIND_WHAT = {
    "encoder": "the encoder's self-attention: source tokens attend to source tokens",
    "decoder": "the decoder's self-attention: each target row attends to the prefix it read",
    "cross": "cross-attention: each target row attends to the source tokens",
}


def described(values, what: dict, where: str) -> list[tuple[str, str]]:
    """(value, its description) for every registered value; a value without one is an error here,
    so that a new one cannot reach the page undescribed."""
    missing = [v for v in values if v not in what]
    if missing:
        raise ValueError(f"{where}: no description of {', '.join(missing)}: add one in qkvmt.record.registry")
    return [(v, what[v]) for v in values]


def signals(record: dict) -> str:
    from qkvmt.analysis.signals import SIGNALS
    from qkvmt.analysis.trace import KINDS

    rows = [
        [
            code(name),
            SIGNALS[name].label,
            ", ".join(code(k) for k in KINDS if k in SIGNALS[name].kinds),
            described([SIGNALS[name].cost], COST, f"signal {name!r}'s cost")[0][1],
        ]
        for name in SIGNALS  # the registry's order: the weights first
    ]
    return table(["signal", "as the pages label it", "kinds", "cost"], rows)


def kinds(record: dict) -> str:
    from qkvmt.analysis.trace import KINDS

    return table(["kind", "what"], [[code(k), w] for k, w in described(KINDS, KIND_WHAT, "KINDS")])


NAMES = {  # how each scope's sites are named (qkvmt.model.hook_names), {n} the site
    "attention": "`encoder.{{i}}.self.{n}`, `decoder.{{i}}.self.{n}`, `decoder.{{i}}.cross.{n}`",
    "block": "`encoder.{{i}}.{{self,ffn}}.{n}`, `decoder.{{i}}.{{self,cross,ffn}}.{n}`",
    "ffn": "`encoder.{{i}}.ffn.{n}`, `decoder.{{i}}.ffn.{n}`",
    "layer": "`encoder.{{i}}.{n}`, `decoder.{{i}}.{n}`",
    "model": "`encoder.{n}`, `decoder.{n}`",
}


def sites(record: dict) -> str:
    """Every activation's name, axes and meaning, from qkvmt.model.sites.SITES."""
    from qkvmt.model.sites import SITES

    def names(s) -> str:
        if s.name == "y":
            return "`decoder.{i}.cross.y`"
        if s.name == "logits":
            return "`logits`"
        return described([s.scope], NAMES, f"scope {s.scope!r}")[0][1].format(n=s.name)

    path = {True: "the explicit path (a hook switches its layer there)", False: "every path"}
    rows = [[names(s), s.shape, s.meaning, path[s.explicit_only]] for s in SITES]
    return table(["names", "axes", "what it holds", "fires on"], rows)


ROWS_WHAT = {
    "predicting": "the decoder steps that predict each target word (Garg et al. 2019)",
    "reading": "the steps that read it as input, one further down (Shift-Att, Chen et al. 2020)",
}
DIRECTION_WHAT = {
    "target_to_source": "each target word links to the source word it attends to most",
    "source_to_target": "each source word links to the target word that attends to it most",
    "intersection": "the links both directions agree on",
}


def policy(record: dict) -> str:
    from qkvmt.alignment.policy import DIRECTIONS, ROWS, AlignmentPolicy, cross_signals

    default = AlignmentPolicy.__dataclass_fields__["signal"].default

    def values(pairs):
        return "; ".join(f"{code(v)}: {w}" for v, w in pairs)

    rows = [
        ["`alignment.layer`", "a decoder layer, 0-based; negative counts from the end"],
        [
            "`alignment.head`",
            "an index, `mean` (the layer as a whole), or `best` (from an AER run: `alignment.aer_file`, default "
            "the result saved beside the checkpoint)",
        ],
        ["`alignment.rows`", values(described(ROWS, ROWS_WHAT, "ROWS"))],
        ["`alignment.direction`", values(described(DIRECTIONS, DIRECTION_WHAT, "DIRECTIONS"))],
        [
            "`alignment.signal`",
            ", ".join(code(s) + (" (the default)" if s == default else "") for s in cross_signals())
            + ": every signal with cross-attention maps ([signals](#signals))",
        ],
        [
            "`alignment.drop`",
            "key columns left out before words are read, each row rescaled to its total: `[]` (the default), or "
            "tokens and classes, e.g. `'alignment.drop=[\"</s>\",punctuation]'` "
            "([without the sinks](#alignment-error-rate-against-gold-links))",
        ],
    ]
    return table(["setting", "values"], rows)
