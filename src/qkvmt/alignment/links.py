"""Word alignment from cross-attention, and its evaluation against gold alignments (AER).

Method. A cross-attention matrix (one layer and head, or a head average) holds, for each target
subword (row), a distribution over source subwords (columns). Gold alignments link whitespace
words, so the subword matrix is first reduced to words (Garg et al. 2019; Zenkel et al. 2019):

* over the subwords of a source word the weights are SUMMED: a word owns all the probability
  mass that falls on any of its pieces;
* over the subwords of a target word the rows are AVERAGED: each piece is a separate query and
  the word takes their mean distribution.

Columns outside every source word (`</s>`, `<s>`, `<pad>`) are dropped. Attention often parks
its mass on `</s>`, and a link to EOS is no link to a word, so EOS must never win the argmax.
Hard links then take, for each target word, the source word with the largest weight.

Links are pairs (source word index, target word index), 0-based: the Pharaoh convention.

Evaluation follows Och & Ney (2003): gold alignments have sure links S and possible links P
with S ⊆ P, and for hypothesis links A, summed over the corpus,

    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|),  precision = |A∩P| / |A|,  recall = |A∩S| / |S|.

Gold data in the TALP layout (e.g. the RWTH German-English set) is a folder with one
tokenized sentence per line in files named by language (`de`, `en`) and `alignment.talp`,
whose lines hold 1-based items "i-j" (sure) or "ipj" (possible), i indexing the words of one
language of the pair, which the caller names (German for RWTH; the scripts' `gold_first`).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qkvmt.errors import UserError
from qkvmt.text.sources import read_lines
from qkvmt.text.tokenizer import BOS, EOS, PAD, WORD_START

# Tokens that belong to no word. <unk> is absent on purpose: it stands for an unseen character
# inside a word and is an ordinary piece of that word.
NON_WORD = frozenset({BOS, EOS, PAD})

Link = tuple[int, int]


def word_groups(tokens: list[str]) -> list[list[int]]:
    """Positions of each whitespace word's subwords, in order; specials belong to no word.

    A token starting with "▁" starts a word and any other token continues the current one
    (the Punctuation pre-tokenizer splits "Haus," into "▁Haus" "," - one whitespace word). The
    first real token, and one following a special, starts a word even without "▁", so a
    leading "<unk>" (or a tokenizer without a prepended "▁") cannot glue onto nothing.
    """
    groups: list[list[int]] = []
    after_special = True
    for pos, tok in enumerate(tokens):
        if tok in NON_WORD:
            after_special = True
            continue
        if tok.startswith(WORD_START) or after_special:
            groups.append([pos])
        else:
            groups[-1].append(pos)
        after_special = False
    return groups


def pair_word_groups(src_tokens: list[str], tgt_tokens: list[str], source: str, target: str):
    """(source groups, target groups) when the subwords group into exactly the whitespace words
    of `source` and `target`, else None: a pair cut at the model's positions no longer lines
    up with its words, and is left out rather than mislabelled or misscored."""
    sg, tg = word_groups(src_tokens), word_groups(tgt_tokens)
    return (sg, tg) if (len(sg), len(tg)) == (len(source.split()), len(target.split())) else None


def group_words(tokens: list[str], groups: list[list[int]]) -> list[str]:
    """Each group's subwords joined into its word, word-start marks removed."""
    return ["".join(tokens[p] for p in g).replace(WORD_START, "") for g in groups]


def word_matrix(weights, tgt_groups: list[list[int]], src_groups: list[list[int]]) -> np.ndarray:
    """(n_tgt_words, n_src_words): subword attention summed over source pieces, averaged over
    target pieces. Rows and columns outside every group (specials such as `</s>`) are dropped."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"weights must be (T_tgt, T_src), got shape {w.shape}")
    for name, groups, size in (("tgt", tgt_groups, w.shape[0]), ("src", src_groups, w.shape[1])):
        bad = [p for g in groups for p in g if not 0 <= p < size]
        if bad or any(not g for g in groups):
            raise ValueError(f"{name}_groups has empty groups or positions {bad} outside 0..{size - 1}")
    # Two indicator products do both reductions: sum_cols (T_src, n_src) adds a word's columns,
    # mean_rows (n_tgt, T_tgt) averages a word's rows.
    sum_cols = np.zeros((w.shape[1], len(src_groups)))
    for i, g in enumerate(src_groups):
        sum_cols[g, i] = 1.0
    mean_rows = np.zeros((len(tgt_groups), w.shape[0]))
    for j, g in enumerate(tgt_groups):
        mean_rows[j, g] = 1.0 / len(g)
    return mean_rows @ w @ sum_cols


def hard_links(matrix) -> set[Link]:
    """For each target word j (row), the link (argmax_i matrix[j, i], j); all-zero rows give none."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2:
        raise ValueError(f"matrix must be (n_tgt_words, n_src_words), got shape {m.shape}")
    if m.shape[1] == 0:
        return set()
    rows = np.flatnonzero(m.any(axis=1))  # a NaN counts as non-zero, as it did row by row
    return set(zip(m.argmax(axis=1)[rows].tolist(), rows.tolist()))


def to_pharaoh(links) -> str:
    """Links as "i-j i-j ...", sorted by (source, target) so equal sets give equal lines."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


_PHARAOH_ITEM = re.compile(r"(\d+)-(\d+)")
_TALP_ITEM = re.compile(r"(\d+)([-p])(\d+)")


def parse_pharaoh(line: str) -> set[Link]:
    """The links of a Pharaoh line "i-j i-j ..." (0-based); ValueError names a malformed item."""
    links = set()
    for item in line.split():
        m = _PHARAOH_ITEM.fullmatch(item)
        if not m:
            raise ValueError(f"malformed Pharaoh link {item!r}: expected 'i-j' with 0-based integers")
        links.add((int(m[1]), int(m[2])))
    return links


def parse_talp_line(line: str) -> tuple[set[Link], set[Link]]:
    """(sure, possible) of one TALP line, converted from 1-based to 0-based; sure ⊆ possible.

    Items are "i-j" (sure) or "ipj" (possible). A malformed item or index 0 raises ValueError
    naming the item (read_gold adds the file and line).
    """
    sure, possible = set(), set()
    for item in line.split():
        m = _TALP_ITEM.fullmatch(item)
        if not m:
            raise ValueError(f"malformed link {item!r}: expected 'i-j' (sure) or 'ipj' (possible)")
        i, j = int(m[1]), int(m[3])
        if i < 1 or j < 1:
            raise ValueError(f"link {item!r} has index 0, but TALP indices are 1-based")
        link = (i - 1, j - 1)
        possible.add(link)  # Och & Ney: every sure link is also possible
        if m[2] == "-":
            sure.add(link)
    return sure, possible


@dataclass
class GoldAlignments:
    """Gold sentences and links; links are (src word, tgt word), 0-based, in the caller's direction."""

    src: list[str]
    tgt: list[str]
    sure: list[set[Link]]
    possible: list[set[Link]]

    def __len__(self) -> int:
        return len(self.src)


def read_gold(gold_dir: Path, src_lang: str = "de", tgt_lang: str = "en", talp_first: str = "de") -> GoldAlignments:
    """Read a TALP gold folder; links come back as (src_lang word, tgt_lang word), 0-based.

    The talp items index talp_first's words first (the `gold_first` setting of the scripts), so
    pairs are swapped when src_lang is the other language (an en->de checkpoint on RWTH). Every
    problem raises UserError naming the file, the line or the setting.
    """
    gold_dir = Path(gold_dir)
    if not gold_dir.is_dir():
        raise UserError(
            f"{gold_dir}: gold alignment folder not found; point to the folder with {src_lang}, {tgt_lang} "
            "and alignment.talp"
        )
    if talp_first not in (src_lang, tgt_lang):
        raise UserError(
            f"gold_first={talp_first!r} is not a language of the checkpoint's pair {src_lang}->{tgt_lang}: set "
            f"gold_first={src_lang} or gold_first={tgt_lang}, the language whose words the first index of "
            f"{gold_dir / 'alignment.talp'} counts"
        )
    second = tgt_lang if talp_first == src_lang else src_lang
    talp_path = gold_dir / "alignment.talp"
    paths = {talp_first: gold_dir / talp_first, second: gold_dir / second, "talp": talp_path}
    missing = [path.name for path in paths.values() if not path.is_file()]
    if missing:
        present = sorted(p.name for p in gold_dir.iterdir() if p.is_file())
        raise UserError(
            f"{gold_dir} lacks {', '.join(missing)}: "
            f"a gold folder for the checkpoint's pair {src_lang}->{tgt_lang} holds "
            f"one tokenized file per language, named {talp_first} and {second}, and alignment.talp "
            f"(it has: {', '.join(present) or 'nothing'}); a gold set of another pair cannot score this checkpoint"
        )
    lines = {key: read_lines(path) for key, path in paths.items()}
    counts = {key: len(v) for key, v in lines.items()}
    if len(set(counts.values())) != 1:
        listed = ", ".join(f"{paths[k].name}: {n}" for k, n in counts.items())
        raise UserError(f"{gold_dir}: files have different line counts ({listed}); they must be line-parallel")

    swap = src_lang != talp_first
    sure_all, possible_all = [], []
    for n, (first, other, talp) in enumerate(zip(lines[talp_first], lines[second], lines["talp"]), start=1):
        where = f"{talp_path}, line {n}"
        try:
            sure, possible = parse_talp_line(talp)
        except ValueError as e:
            raise UserError(f"{where}: {e}; fix or remove the item") from e
        n_first, n_second = len(first.split()), len(other.split())
        for i, j in sorted(possible):
            if i >= n_first or j >= n_second:
                raise UserError(
                    f"{where}: link {i + 1}-{j + 1} (1-based) is out of range: line {n} has {n_first} "
                    f"{talp_first} words and {n_second} {second} words; check that the files are line-parallel"
                )
        if swap:
            sure, possible = {(j, i) for i, j in sure}, {(j, i) for i, j in possible}
        sure_all.append(sure)
        possible_all.append(possible)
    return GoldAlignments(src=lines[src_lang], tgt=lines[tgt_lang], sure=sure_all, possible=possible_all)


def alignment_scores(hyp: list[set[Link]], sure: list[set[Link]], possible: list[set[Link]]) -> dict:
    """Corpus-level AER, precision and recall (Och & Ney 2003), plus the counts behind them.

    Counts are summed over sentences before dividing. Possible links are taken as P ∪ S, so
    S ⊆ P holds even if a caller's P omits the sure links. An empty hypothesis gets precision
    0.0 (it proposes nothing correct) and AER 1.0; gold without any sure link raises ValueError,
    since recall and AER are then undefined.
    """
    if not len(hyp) == len(sure) == len(possible):
        raise ValueError(f"sentence counts differ: hyp {len(hyp)}, sure {len(sure)}, possible {len(possible)}")
    n_a = n_s = n_p = a_s = a_p = 0
    for a, s, p in zip(hyp, sure, possible):
        a, s, p = set(a), set(s), set(p) | set(s)
        n_a, n_s, n_p = n_a + len(a), n_s + len(s), n_p + len(p)
        a_s, a_p = a_s + len(a & s), a_p + len(a & p)
    if n_s == 0:
        raise ValueError("the gold alignments have no sure links, so recall and AER are undefined")
    return {
        "aer": 1.0 - (a_s + a_p) / (n_a + n_s),
        "precision": a_p / n_a if n_a else 0.0,
        "recall": a_s / n_s,
        "hyp": n_a,
        "sure": n_s,
        "possible": n_p,
        "hyp_and_sure": a_s,
        "hyp_and_possible": a_p,
    }
