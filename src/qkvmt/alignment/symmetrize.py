"""Symmetrizing two directional word alignments into one (Koehn et al. 2005; Koehn, SMT, 4.5).

Both inputs are link sets in one orientation, (source word i, target word j), 0-based: one
from the source-to-target aligner, one from the target-to-source aligner (flipped back).

* intersection: the links both directions propose (high precision);
* union: either direction's (high recall);
* grow-diag: start from the intersection and repeatedly add links of the union that neighbour
  (also diagonally) a link already there, as long as the added link's source or target word is
  still unaligned;
* grow-diag-final: then add the remaining links of each direction whose source *or* target word
  is unaligned; grow-diag-final-and: only those whose source *and* target words are unaligned.

The scans run in a fixed order (source word, then target word), as Moses' implementation
does, so the result is deterministic.
"""

from qkvmt.alignment.links import Link

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
METHODS = ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")


def symmetrize(forward: set[Link], reverse: set[Link], method: str = "grow-diag-final-and") -> set[Link]:
    """One link set from the two directions' (both as (source word, target word) pairs)."""
    if method not in METHODS:
        raise ValueError(f"unknown symmetrization {method!r}: use one of {', '.join(METHODS)}")
    forward, reverse = set(forward), set(reverse)
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    links = forward & reverse
    if links:
        _grow_diag(links, forward | reverse)
    if method != "grow-diag":
        both = method == "grow-diag-final-and"
        for direction in (forward, reverse):
            _final(links, direction, both)
    return links


def _grow_diag(links: set[Link], union: set[Link]) -> None:
    src_done, tgt_done = {i for i, _ in links}, {j for _, j in links}
    n_src, n_tgt = max(i for i, _ in union) + 1, max(j for _, j in union) + 1
    added = True
    while added:
        added = False
        # Scan every position in order; a link added in this pass is grown from later in it.
        for i in range(n_src):
            for j in range(n_tgt):
                if (i, j) not in links:
                    continue
                for di, dj in NEIGHBOURS:
                    new = (i + di, j + dj)
                    if new in union and new not in links and (new[0] not in src_done or new[1] not in tgt_done):
                        links.add(new)
                        src_done.add(new[0])
                        tgt_done.add(new[1])
                        added = True


def _final(links: set[Link], direction: set[Link], both_unaligned: bool) -> None:
    src_done, tgt_done = {i for i, _ in links}, {j for _, j in links}
    for i, j in sorted(direction):
        free_src, free_tgt = i not in src_done, j not in tgt_done
        if (free_src and free_tgt) if both_unaligned else (free_src or free_tgt):
            links.add((i, j))
            src_done.add(i)
            tgt_done.add(j)
