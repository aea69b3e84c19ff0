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


REACHED = {
    "site": "inside the attention",
    "input": "the attention's input",
    "w_o input": "W_O's input",
    "output": "the attention's output",
    "block input": "the residual block's input",
    "block output": "the residual block's output",
    "embedding": "the embedding",
}


def sites(record: dict) -> str:
    from qkvmt.model.sites import MODEL_SITE_SPECS, SITES

    def row(s, scope):
        reached = described([s.reached], REACHED, f"site {s.name!r}'s place")[0][1]
        path = "the explicit path (an edit switches its layer there)" if s.explicit_only else "every path"
        return [code(s.name), scope, s.shape, s.meaning, reached, "yes" if s.writable else "read only", path]

    rows = [row(s, "each layer") for s in SITES] + [row(s, "the model") for s in MODEL_SITE_SPECS]
    return table(["site", "of", "shape", "what it holds", "reached at", "edit", "fires on"], rows)


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
