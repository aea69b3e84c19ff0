"""The swap study: in each sentence the keys, the values or both of two translated source words, A
and B, trade places in cross-attention, in every layer at once and in each layer alone.

Attention's output is Σ_j α_j v_j with α = softmax(q·k_j/√d_k): swapping the keys moves the
weights between the two positions, swapping the values moves what the weights take, and either
way the sum is the same. So keys only and values only give one output (up to float error), and
both together give the original's. The output cannot tell keys from values; the map can: with
the keys swapped, the rows that looked at A look at B's position, and with the values swapped
they look where they did.
"""

from qkvmt.decoding.search import DecodeConfig
from qkvmt.studies.kv import summary
from qkvmt.studies.kv.passes import Batch, Pass, Sentence, positions, run
from qkvmt.studies.kv.row_edits import at_sites, swap_rows
from qkvmt.studies.kv.words import SWAP_OUTCOMES, swap_outcome
from qkvmt.text.tokenizer import decode

PARTS = ("keys", "values", "both")
AT = {"A": lambda s: s.a.position, "B": lambda s: s.b.position}


def scopes(n_layers: int) -> list[tuple[str, list[int]]]:
    """Every layer at once, then each layer alone: (label, layers)."""
    return [("every layer", list(range(n_layers)))] + [(f"layer {i}", [i]) for i in range(n_layers)]


def swap_sites(sentences: list[Sentence], part: str, layers: list[int]):
    def sites_of(batch: Batch) -> dict:
        swap = swap_rows(positions(batch, sentences, AT["A"]), positions(batch, sentences, AT["B"]))
        return at_sites(part, layers, lambda layer, site: swap)

    return sites_of


def identities(by_edit: dict[tuple[str, str], list[Pass]], before: list[Pass], sentences: list[Sentence]) -> dict:
    """Per scope, how exactly keys-only matched values-only, and both the original: the share of
    sentences with the same translation, and the largest change of any original token's log p."""
    out = {}
    for scope in dict.fromkeys(s for _, s in by_edit):
        keys, values, both = (by_edit[part, scope] for part in PARTS)
        out[scope] = {
            "keys_values_same_translation": summary.same_translation(keys, values),
            "keys_values_largest_log_prob_difference": summary.largest_difference(keys, values),
            "both_same_translation_as_original": summary.same_translation(both, [s.original for s in sentences]),
            "both_largest_log_prob_change": summary.largest_difference(both, before),
        }
    return out


def swap_study(model, sentences: list[Sentence], all_batches: list[Batch], cfg: DecodeConfig, progress=None) -> dict:
    """Every swap on every sentence: each edit's summary, the identities, and each sentence's
    edited translations (`sentences`, in the study's order)."""
    before = run(model, sentences, all_batches, lambda batch: {}, cfg, search=False)
    by_edit, conditions, edited = {}, [], {}
    for scope, layers in scopes(len(model.transformer.decoder_layers)):
        for part in PARTS:
            passes = run(model, sentences, all_batches, swap_sites(sentences, part, layers), cfg)
            by_edit[part, scope] = passes
            texts = decode(model.tokenizer, [p.edited for p in passes])
            outcomes = [swap_outcome(s.a.target, s.b.target, s.translation, e) for s, e in zip(sentences, texts)]
            summed = summary.condition(model.tokenizer, sentences, passes, before, outcomes, SWAP_OUTCOMES, AT)
            conditions.append({"swapped": part, "layers": scope, **summed})
            edited[f"{part}, {scope}"] = list(zip(texts, outcomes))
            if progress:
                progress(f"swap {part}, {scope}")
    per_sentence = [
        {
            "line": s.line,
            "A": s.a.text,
            "B": s.b.text,
            "A_translation": s.a.target,
            "B_translation": s.b.target,
            "edits": {label: list(found[k]) for label, found in edited.items()},
        }
        for k, s in enumerate(sentences)
    ]
    return {"conditions": conditions, "identities": identities(by_edit, before, sentences), "sentences": per_sentence}
