"""The study of keys and values as a result: its tables in Markdown (study.md, and the same tables
where docs/analysis.md shows the recorded runs: table), and KeyValueStudy (`Model.study`), which
shows itself and saves study.json, study.md and sentences.jsonl.

A study's result is the dict `qkvmt intervene study=...` writes to study.json, or the part of it
the record keeps."""

import json
from dataclasses import dataclass
from pathlib import Path

from qkvmt.files import write_json, write_text
from qkvmt.results.html import escape, page
from qkvmt.results.markdown import table
from qkvmt.results.result import Result, timed


def percent(x: float) -> str:
    return f"{100 * x:.0f}%"


def change(m: dict) -> str:
    """A mean change of log p per token with its 95% interval."""
    ci = m.get("ci95")
    return f"{m['mean']:+.3f}" + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")


def shares(condition: dict, at: str) -> str:
    """Before → after, layer by layer."""
    return " · ".join(f"{s[at]['before']:.2f}→{s[at]['after']:.2f}" for s in condition["shares"])


def layer_names(conditions: list[dict]) -> str:
    return " · ".join(str(i) for i in range(len(conditions[0]["shares"])))


def swap_table(swap: dict) -> str:
    rows = [
        [
            c["swapped"],
            c["layers"],
            percent(c["outcomes"]["traded"]),
            percent(c["outcomes"]["changed"]),
            percent(c["unchanged"]),
            f"{c['chrf']:.1f}",
            change(c["log_prob_change"]),
            shares(c, "A"),
            shares(c, "B"),
        ]
        for c in swap["conditions"]
    ]
    layers = layer_names(swap["conditions"])
    header = [
        "swapped",
        "in",
        "A and B trade places",
        "A or B lost",
        "translation unchanged",
        "chrF vs original",
        "Δ log p per token",
        f"A's rows on A (layer {layers})",
        "A's rows on B",
    ]
    return table(header, rows)


def identity(scope: str, i: dict) -> str:
    """How exactly, in one scope, keys only gave values only's output, and both the original's."""
    same, both = percent(i["keys_values_same_translation"]), percent(i["both_same_translation_as_original"])
    return (
        f"- {scope}: keys only and values only give the same translation for {same} of the sentences"
        f" (largest log p difference {i['keys_values_largest_log_prob_difference']:.1e}); both together give"
        f" the original for {both} (largest log p change {i['both_largest_log_prob_change']:.1e})"
    )


def identities(swap: dict) -> str:
    return "\n".join(identity(scope, i) for scope, i in swap["identities"].items())


def patch_table(patch: dict) -> str:
    rows = [
        [
            c["patched"],
            percent(c["outcomes"]["donor"]),
            percent(c["outcomes"]["original"]),
            percent(c["outcomes"]["other"]),
            f"{c['chrf']:.1f}",
            change(c["log_prob_change"]),
            shares(c, "A"),
        ]
        for c in patch["conditions"]
    ]
    header = [
        "A's ... from the donor",
        "donor's word",
        "own word",
        "both or neither",
        "chrF vs original",
        "Δ log p per token",
        f"A's rows on A (layer {layer_names(patch['conditions'])})",
    ]
    return table(header, rows)


def tables(result: dict) -> str:
    """The swap table with its identities, and the patch table, for the studies the result holds."""
    parts = []
    swap, patch = result.get("swap"), result.get("patch")
    if swap:
        parts += [
            f"Swap, {result['n']} sentences: words A and B trade their cross-attention keys, values or both.",
            swap_table(swap),
            identities(swap),
        ]
    if patch and patch["conditions"]:
        n = patch["conditions"][0]["n"]
        parts += [
            f"Patch, {n} sentences (no donor found for {patch['without_donor']}): word A's key, value or both, in"
            " every cross-attention layer, from a sentence with another word in A's place.",
            patch_table(patch),
        ]
    signature = next((c["signature"] for s in (swap, patch) if s for c in s["conditions"]), None)
    if signature:
        parts.append(f"chrF: sacreBLEU `{signature}`, the edited translations scored against the originals.")
    return "\n\n".join(parts)


def markdown(result: dict) -> str:
    """study.md: what was studied, then the tables."""
    d = result["decoding"]
    skipped = ", ".join(f"{v} {k}" for k, v in result["skipped"].items()) or "none"
    head = (
        f"# Keys and values: {result['model']} on {result['split']}\n\n"
        f"{result['n']} sentences, the first with two translated words (passed over before the last: {skipped}); "
        f"beam {d['beam_size']}. A's rows: the cross-attention of the rows that wrote A's translation, heads and "
        "rows averaged, on each layer, before → after the edit. Δ log p: the original translation's tokens under "
        "the edit, mean [95% interval] over sentences.\n"
    )
    return head + "\n" + tables(result) + "\n"


@dataclass
class KeyValueStudy(Result):
    result: dict  # what study.json holds
    sentences: list[dict]  # per sentence: its line, source, translation, and what each study did to it

    def markdown(self) -> str:
        return markdown(self.result)

    def summary(self) -> str:
        """study.md, and how long each study took."""
        return self.markdown() + timed(self.result)

    def html(self) -> str:
        return page("Keys and values", f"<pre>{escape(self.summary())}</pre>", {"page": "text"})

    def files(self) -> dict:
        lines = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in self.sentences)
        return {
            "study.json": lambda path: write_json(Path(path), self.result),
            "study.md": lambda path: write_text(Path(path), self.markdown()),
            "sentences.jsonl": lambda path: write_text(Path(path), lines),
        }
