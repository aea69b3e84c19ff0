"""A folder of qkvmt align gold_dir=... leaderboard=true recorded: each signal's layers as a whole,
the weights with and without their sinks, at the rows and direction the dev pairs chose, in the
AER table and the alignment table. (A folder of qkvmt faithfulness: tests/pipeline/test_faithfulness.py.)"""

import copy
import json
import random

import pytest

from qkvmt.errors import UserError
from qkvmt.host.machine import recorded_with
from qkvmt.record import from_analysis, record_file, tables
from tests.record.conftest import RECORD, rows

SINKS = ["</s>", "punctuation"]


def leaderboard(seed: int = 0) -> list[dict]:
    """Every head-average reading of two signals × two layers (the weights also without their
    sinks) at each rows × direction, and some heads, with random scores, best dev AER first."""
    rng = random.Random(seed)
    board = []
    for signal, drops in (("weights", [[], SINKS]), ("alti", [[]])):
        for layer in (0, 1):
            for drop in drops:
                for head in ("mean", 0):
                    for rows_, direction in (("predicting", "target_to_source"), ("reading", "intersection")):
                        aer, dev = rng.random(), rng.random()
                        board.append(
                            {
                                "signal": signal,
                                "layer": layer,
                                "head": head,
                                "rows": rows_,
                                "direction": direction,
                                "drop": drop,
                                "aer": aer,
                                "precision": rng.random(),
                                "recall": rng.random(),
                                "dev_aer": dev,
                            }
                        )
    return sorted(board, key=lambda r: r["dev_aer"])


def aer_folder(tmp_path, board) -> object:
    folder = tmp_path / "aer"
    folder.mkdir()
    scores = {
        "model": "multi30k-de-en",
        "gold_dir": "/data/rwth",
        "gold": {"dir": "/data/rwth", "sha256": "0", "pairs": 8, "scored": 8},
        "n": 6,
        "dev": {"first_pairs": 2, "n": 2},
        "leaderboard": board,
        "best": board[0] if board else None,
        **recorded_with(),
    }
    (folder / "aer.json").write_text(json.dumps(scores))
    return folder


def test_each_layer_as_a_whole_is_recorded_at_the_reading_the_dev_pairs_chose_and_tabled(tmp_path):
    board = leaderboard()
    entry, classes = from_analysis.entry(aer_folder(tmp_path, board), commit="abc", taken_ids=())
    chosen = {}  # (signal, layer, drop) -> the head-average row of the lowest dev AER
    for r in board:
        key = (r["signal"], r["layer"], tuple(r["drop"]))
        if r["head"] == "mean" and (key not in chosen or r["dev_aer"] < chosen[key]["dev_aer"]):
            chosen[key] = r
    got = {(r["signal"], r["layer"], tuple(r["drop"])): r for r in entry["aer_readings"]["readings"]}
    assert set(got) == set(chosen) and len(got) == 6  # weights 2 layers × 2, alti 2 layers
    for key, r in chosen.items():
        assert (got[key]["rows"], got[key]["direction"]) == (r["rows"], r["direction"])
        assert got[key]["aer"] == pytest.approx(r["aer"], abs=1e-4)
    assert got["weights", 1, tuple(SINKS)]["label"] == "weights layer 1 without </s> and punctuation"
    weights = [r for k, r in chosen.items() if k[0] == "weights"]
    best = {drop: min((r for r in weights if bool(r["drop"]) == drop), key=lambda r: r["dev_aer"]) for drop in (0, 1)}
    assert entry["alignment"][0]["aer"] == {
        "weights": round(100 * best[0]["aer"], 1),
        "weights without sinks": round(100 * best[1]["aer"], 1),
    }
    assert entry["aer_of"] == "multi30k-de-en" and entry["id"] == "aer-multi30k-de-en-1"
    assert entry["aer_readings"]["gold"] == "rwth, pairs 3-8 (pairs 1-2 choose each reading's rows and direction)"
    assert "gold_dev=2" in entry["command"] and "leaderboard=true" in entry["command"]
    record = record_file.add({**copy.deepcopy(RECORD), "methods": {"command": "the command"}}, entry, classes)
    table = rows(tables.TABLES["aer-readings"](record).split("\n\n")[1])
    line = next(x for x in table if x[0] == "weights layer 1 without </s> and punctuation")
    r = chosen["weights", 1, tuple(SINKS)]
    assert line[1:] == [
        f"{r['rows']}, {r['direction']}",
        *(f"{100 * r[k]:.1f}" for k in ("dev_aer", "aer", "precision", "recall")),
    ]
    top = board[0]  # the best reading of all, a head or a layer as a whole
    assert table[-1][0].startswith(f"the best head: {top['signal']} layer {top['layer']}")
    assert table[-1][0].endswith(f", head {top['head']}") and table[-1][3] == f"{100 * top['aer']:.1f}"
    assert "aer-multi30k-de-en-1" in tables.TABLES["alignment"](record)
    assert "aer-multi30k-de-en-1" not in tables.figures(record, "measurement")  # in its own tables only


def test_an_aer_folder_without_a_leaderboard_is_one_line(tmp_path):
    with pytest.raises(UserError, match="without a leaderboard: record one of qkvmt align leaderboard=true"):
        from_analysis.entry(aer_folder(tmp_path, []), taken_ids=())
