"""The vocabularies generated from the record: the de->en CPU recipe trained with each `data.tokenizer`
choice (qkvmt.data.vocabularies) at one budget, beside the joint BPE it makes by default, its test
BLEU and chrF over seeds. A run counts where its overrides choose a vocabulary (or none: the joint
BPE) and change no model setting; the rest of its overrides are its budget, shared by every row of
its table. A budget gets a table where the joint BPE and another choice have runs at it, on the
same class of hardware."""

from qkvmt.record.ablation_table import runs_of
from qkvmt.record.markdown import hardware, spread, train_command
from qkvmt.record.summary import Group, groups
from qkvmt.results.markdown import code, command, table

RECIPE = "multi30k_de_en_cpu"
# The overrides that choose each vocabulary (sorted), its name and what it is. The command line's
# data.tokenizer=NAME is recorded as Hydra spells the choice of a nested group, data/tokenizer=NAME.
CHOICES = {
    (): ("joint BPE (the default)", "one BPE over both languages, HF tokenizers; tied embeddings"),
    ("data/tokenizer=separate_bpe",): (
        "separate BPE",
        "two SentencePiece BPE models, one per language; untied embeddings",
    ),
    ("data/tokenizer=sentencepiece",): ("SentencePiece unigram", "one SentencePiece unigram model over both"),
    ("data.tokenizer.model_type=bpe", "data/tokenizer=sentencepiece"): (
        "SentencePiece BPE",
        "one SentencePiece BPE model over both",
    ),
}


def choice_of(g: Group) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the vocabulary's overrides, the budget's overrides) of a group of the recipe, or None where it
    changes a model setting or chooses no listed vocabulary."""
    if any(o.startswith("model.") for o in g.overrides):
        return None
    chosen = tuple(sorted(o for o in g.overrides if o.startswith(("data/tokenizer=", "data.tokenizer"))))
    budget = tuple(o for o in g.overrides if o not in chosen)
    return (chosen, budget) if chosen in CHOICES else None


def vocabularies(record: dict) -> str:
    by_budget: dict[tuple, dict[tuple, Group]] = {}
    for g in groups(record["runs"], "train"):
        made = choice_of(g) if g.recipe == RECIPE else None
        if made is not None:
            chosen, budget = made
            by_budget.setdefault((budget, g.hardware_class, g.cores), {})[chosen] = g
    shown = []
    for (budget, cls, cores), rows in by_budget.items():
        if () not in rows or len(rows) < 2:
            continue
        base = rows[()].stat(lambda r: r["test"]["bleu"]).mean
        out = []
        for chosen, (name, what) in CHOICES.items():
            if chosen not in rows:
                continue
            g = rows[chosen]
            bleu = g.stat(lambda r: r["test"]["bleu"])
            out.append(
                [
                    name,
                    what,
                    f"{g.stat(lambda r: r.get('parameters')).mean / 1e6:.2f} M",
                    runs_of(g),
                    spread(bleu),
                    "" if chosen == () else f"{bleu.mean - base:+.2f}",
                    spread(g.stat(lambda r: r["test"].get("chrf"))),
                    command(train_command(RECIPE, g.overrides)),
                ]
            )
        header = ["vocabulary", "what", "parameters", "runs", "test BLEU", "against joint BPE", "chrF", "command"]
        shown.append(
            f"{code(RECIPE)}{' with ' + code(' '.join(budget)) if budget else ' for its own time'}, on "
            f"{hardware(record, cls, cores)}; test BLEU on "
            f"{rows[()].runs[0]['test']['split']}, the mean and range over seeds.\n\n{table(header, out)}"
        )
    return "\n\n".join(shown) or "No vocabulary comparison is recorded yet."
