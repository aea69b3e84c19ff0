"""The explorer's memory stays bounded however long it serves: it keeps the RECENT latest
sentences, and per sentence the latest heads and rows asked for (bounded_cache.Kept)."""

import qkvmt
from qkvmt.explore import session
from qkvmt.explore.bounded_cache import Kept
from qkvmt.explore.session import Explorer
from tests.model.test_checked_weights import tiny_folder


def test_kept_holds_its_latest_entries_and_a_lookup_counts_as_latest():
    kept = Kept(3)
    for i in range(5):
        kept[i] = str(i)
    assert list(kept) == [2, 3, 4]
    assert kept.latest(2) == "2"
    kept[5] = "5"
    assert list(kept) == [4, 2, 5]  # 3, asked for longest ago, went first


def test_an_explorer_serving_many_sentences_heads_and_rows_keeps_only_its_bounds(tmp_path, monkeypatch):
    """An untrained tiny model: the bounds hold whatever it translates."""
    monkeypatch.setattr(session, "RECENT", 3)
    monkeypatch.setattr(session, "HEADS_KEPT", 2)
    explorer = Explorer(qkvmt.load(tiny_folder(tmp_path / "model"), device="cpu"))
    sources = [f"w{i} w{i + 1} w{i + 2}" for i in range(5)]
    for source in sources:
        explorer.sentence({"source": source})
        for layer in (0, 1):
            for head in range(4):
                explorer.inspect({"source": source, "kind": "encoder", "layer": layer, "head": head, "row": 0})
    assert list(explorer._recent) == sources[-3:]
    assert all(list(s.heads) == [("encoder", 1, 2), ("encoder", 1, 3)] for s in explorer._recent.values())
    explorer.sentence({"source": sources[2]})  # asked again: the latest, kept longest
    explorer.sentence({"source": "w9 w8"})
    assert list(explorer._recent) == [sources[4], sources[2], "w9 w8"]
