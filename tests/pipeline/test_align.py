"""align.py: one sentence's cross-attention alignment, and AER against gold links."""

import json
import os

import pytest
import torch

from qkvmt.alignment.directions import SOFT, SOFT_THRESHOLD
from qkvmt.alignment.links import alignment_scores, read_gold
from qkvmt.alignment.symmetrize import METHODS, symmetrize
from qkvmt.errors import UserError
from qkvmt.pipeline.align import align
from qkvmt.pipeline.align_settings import training_pairs_of
from qkvmt.studies.two_way import THRESHOLDS
from qkvmt.text.tokenizer import train_bpe
from tests.commandline import run_script
from tests.conftest import compose_inference

SCRIPT = "w1 w2, <script>alert(1)</script> ä w3"  # typed as is: comma, tag, umlaut


def test_align_script_on_a_sentence_with_a_script_tag(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    r = run_script("align", f"ckpt_path={ckpt}", f"sentence={SCRIPT}", f"output_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-2000:]
    translation, pharaoh = r.stdout.splitlines()[-2:]
    data = json.loads((tmp_path / "alignment.json").read_text())
    n_src, n_tgt = len(data["src_words"]), len(data["tgt_words"])
    assert n_src == len(SCRIPT.split()) and n_tgt == len(translation.split())
    for item in pharaoh.split():
        i, j = map(int, item.split("-"))
        assert 0 <= i < n_src and 0 <= j < n_tgt
    n_layers, n_heads = 2, 4  # model=tiny
    assert len(data["cross"]) == n_layers and all(len(layer) == n_heads for layer in data["cross"])
    for layer in data["cross"]:
        for head in layer:
            assert len(head) == len(data["tgt_tokens"]) and all(len(row) == len(data["src_tokens"]) for row in head)
            assert all(abs(sum(row) - 1) < 1e-4 for row in head)
    assert data["policy"] == {
        "layer": 0,
        "head": "mean",
        "rows": "predicting",
        "direction": "target_to_source",
        "signal": "weights",
    }
    html = (tmp_path / "alignment.html").read_text()
    assert "<script>alert(1)</script>" not in html and (tmp_path / "alignment.png").stat().st_size > 0


def test_forced_reference_aligns_the_given_words(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    cfg = compose_inference(
        "align", f"ckpt_path={ckpt}", "sentence='w1 w2 w3'", "reference='t3 t2 t1 t9'", f"output_dir={tmp_path}"
    )
    assert align(cfg)["translation"] == "t3 t2 t1 t9"
    data = json.loads((tmp_path / "alignment.json").read_text())
    assert data["forced"] and data["tgt_words"] == ["t3", "t2", "t1", "t9"]
    assert sorted(j for _, j in data["links"]) == [0, 1, 2, 3]  # every target word gets one link


def write_gold(folder, pairs):
    """pairs: (German words, English words, talp line)."""
    folder.mkdir()
    (folder / "de").write_text("".join(" ".join(d) + "\n" for d, _, _ in pairs))
    (folder / "en").write_text("".join(" ".join(e) + "\n" for _, e, _ in pairs))
    (folder / "alignment.talp").write_text("".join(t + "\n" for _, _, t in pairs))
    return folder


def test_aer_for_every_layer_and_head_then_best_is_reused(trained_run, tmp_path):
    # The toy target reverses the source, so word i of n links to target word n-1-i (1-based in talp).
    gold = write_gold(
        tmp_path / "gold",
        [
            (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
            (["w4", "w5"], ["t5", "t4"], "1-2 2p1"),
        ],
    )
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    out = tmp_path / "aer"
    result = align(
        compose_inference("align", f"ckpt_path={ckpt}", f"gold_dir={gold}", "leaderboard=true", f"output_dir={out}")
    )
    written = json.loads((out / "aer.json").read_text())
    assert written["n"] == 2 and set(written["layers"]) == {"layer0", "layer1"}
    for layer in written["layers"].values():
        assert set(layer) == {"head0", "head1", "head2", "head3", "mean"}
        for head in layer.values():
            assert set(head) == {"predicting", "reading"}
            for by_direction in head.values():
                assert set(by_direction) == {"target_to_source", "source_to_target", "intersection"}
                for s in by_direction.values():
                    assert 0.0 <= s["aer"] <= 1.0 and 0.0 <= s["precision"] <= 1.0
    best = result["best"]
    every = [
        s for by_head in written["layers"].values() for h in by_head.values() for r in h.values() for s in r.values()
    ]
    readings = [row for row in written["leaderboard"] if "layer" in row]  # the weights with and without sinks
    assert best["aer"] == min(row["aer"] for row in readings) <= min(s["aer"] for s in every)
    assert (out / "aer.png").stat().st_size > 0
    reuse = align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            "sentence='w1 w2'",
            "reference='t2 t1'",
            "alignment.head=best",
            f"output_dir={tmp_path / 'b'}",
        )
    )
    used = json.loads((tmp_path / "b" / "alignment.json").read_text())["policy"]
    assert all(used[k] == best[k] for k in ("layer", "head", "rows", "direction"))
    assert used.get("drop", []) == best["drop"]  # a best read without the sinks is reused without them
    assert reuse["pharaoh"]


def test_value_norms_align_and_the_leaderboard_scores_every_signal(trained_run, tmp_path):
    from qkvmt.alignment.links import alignment_scores, pair_word_groups, read_gold
    from qkvmt.alignment.policy import AlignmentPolicy, cross_signals, directed_links
    from qkvmt.analysis.forced import forced_attention, one_pass_signals
    from qkvmt.analysis.signals import SIGNALS
    from qkvmt.loading import load_model
    from tests.analysis.throwaway import PER_LAYER, SLOW, WHOLE, throwaway_signals

    gold = write_gold(
        tmp_path / "gold",
        [
            (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
            (["w4", "w5", "w6", "w7"], ["t7", "t6", "t5", "t4"], "1-4 2-3 3-2 4p1"),
        ],
    )
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    one = align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            "sentence='w1 w2 w3'",
            "reference='t3 t2 t1'",
            "alignment.signal=value_norms",
            f"output_dir={tmp_path / 'one'}",
        )
    )
    assert json.loads((tmp_path / "one" / "alignment.json").read_text())["policy"]["signal"] == "value_norms"
    assert one["pharaoh"]
    with throwaway_signals() as slow_calls:  # registered signals join the board with no edit of align.py
        result = align(
            compose_inference(
                "align", f"ckpt_path={ckpt}", f"gold_dir={gold}", "leaderboard=true", f"output_dir={tmp_path / 'board'}"
            )
        )
        shown = {s for s in cross_signals() if s in one_pass_signals()}
        assert not slow_calls  # many passes: only when named
        named = align(
            compose_inference(
                "align",
                f"ckpt_path={ckpt}",
                f"gold_dir={gold}",
                "leaderboard=true",
                f"leaderboard_signals=[{SLOW}]",
                f"output_dir={tmp_path / 'named'}",
            )
        )
        assert len(slow_calls) == 2  # once per gold pair
        model, tok, _ = load_model(ckpt)
        maps = [forced_attention(model, tok, "w1", "t1", analyses=shown).map("cross", s) for s in shown]
    board = result["leaderboard"]
    assert {row["signal"] for row in board} == shown and {PER_LAYER, WHOLE, "weights", "alti"} <= shown
    assert board[0] == result["best"] and [row["aer"] for row in board] == sorted(row["aer"] for row in board)
    # each signal × its own layers × (its heads, if any, + mean) × rows × directions, and again without
    # the signal's sinks where it names some (the weights)
    readings = [len(m.layers) * (1 + (0 if m.weights is None else m.weights.shape[1])) for m in maps]
    again = [2 if getattr(SIGNALS.get(m.signal), "sinks", ()) else 1 for m in maps]  # throwaways: gone, none
    assert len(board) == sum(n * k for n, k in zip(readings, again)) * 2 * 3 and max(again) == 2
    assert {(r["layer"], r["head"]) for r in board if r["signal"] == WHOLE} == {(0, "mean")}
    assert {(r["layer"], r["head"]) for r in board if r["signal"] == PER_LAYER} == {(0, "mean"), (1, "mean")}
    assert {row["signal"] for row in named["leaderboard"]} == shown | {SLOW}
    assert [r for r in named["leaderboard"] if r["signal"] != SLOW] == board  # the same rows, in the same order
    # Our own computation of one row, from the model itself:
    row = next(
        r
        for r in board
        if r["signal"] == "value_norms"
        and r["head"] == "mean"
        and r["rows"] == "predicting"
        and r["direction"] == "intersection"
        and r["layer"] == 1
    )
    g = read_gold(gold, "de", "en")
    links = []
    for src, tgt in zip(g.src, g.tgt):
        sa = forced_attention(model, tok, src, tgt)
        sg, tg = pair_word_groups(sa.src_tokens, sa.out_tokens, src, tgt)
        m = AlignmentPolicy(1, "mean", signal="value_norms").word_matrix(sa.map("cross", "value_norms"), tg, sg)
        links.append(directed_links(m, "intersection"))
    assert alignment_scores(links, g.sure, g.possible)["aer"] == row["aer"]


@pytest.mark.parametrize(
    "override,message",
    [
        (
            "leaderboard_signals=[alti2]",
            "leaderboard_signals: 'alti2' is no signal of cross-attention; use some of weights",
        ),
        ("leaderboard_signals=[value_norms]", "leaderboard_signals=value_norms: add leaderboard=true"),
    ],
)
def test_bad_leaderboard_signals_are_one_line_before_any_work(trained_run, tmp_path, override, message):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    gold = write_gold(tmp_path / "gold", [(["w1"], ["t1"], "1-1")])
    board = ["leaderboard=true"] if "alti2" in override else []
    with pytest.raises(UserError, match=message) as e:
        align(
            compose_inference(
                "align", f"ckpt_path={ckpt}", f"gold_dir={gold}", override, *board, f"output_dir={tmp_path / 'out'}"
            )
        )
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("override", ["alignment.signal=alti2"])
def test_an_unknown_signal_is_one_line_before_any_work(trained_run, tmp_path, override):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    for task in ("sentence='w1 w2'", f"gold_dir={write_gold(tmp_path / 'gold', [(['w1'], ['t1'], '1-1')])}"):
        with pytest.raises(UserError, match=r"alignment.signal='alti2': use one of weights, value_norms"):
            align(compose_inference("align", f"ckpt_path={ckpt}", task, override, f"output_dir={tmp_path / 'out'}"))
        assert not (tmp_path / "out").exists()


@pytest.mark.skipif(
    not os.environ.get("QKVMT_RWTH"), reason="RWTH gold alignments not configured: set QKVMT_RWTH (.ci/run does)"
)
def test_aer_on_the_real_rwth_set_has_every_layer_and_head(trained_run, tmp_path):
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    result = align(
        compose_inference(
            "align", f"ckpt_path={ckpt}", f"gold_dir={os.environ['QKVMT_RWTH']}", f"output_dir={tmp_path}"
        )
    )
    assert result["n"] + result["skipped_too_long"] == 508 and result["n"] > 400
    assert all(len(layer) == 5 for layer in result["layers"].values())


def test_a_supervised_checkpoint_aligns_with_its_head_and_eflomal_is_scored_beside_it(supervised_run, tmp_path, capsys):
    ckpt = supervised_run["run"] / "checkpoints" / "last.ckpt"
    align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            "sentence='w1 w2 w3'",
            "reference='t3 t2 t1'",
            f"output_dir={tmp_path / 'one'}",
        )
    )
    one = json.loads((tmp_path / "one" / "alignment.json").read_text())
    assert (one["policy"]["layer"], one["policy"]["head"], one["full_context_layer"]) == (1, 1, 1)
    assert one["policy"]["direction"] == "intersection"
    items = [
        (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
        (["w4", "w5", "w6", "w7"], ["t7", "t6", "t5", "t4"], "1-4 2-3 3-2 4-1"),
        (["w8", "w9"], ["t9", "t8"], "1-2 2-1"),
    ]
    gold = write_gold(tmp_path / "gold", items)
    training = set(zip(*training_pairs_of(ckpt)))
    out = tmp_path / "aer"
    result = align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            f"gold_dir={gold}",
            f"output_dir={out}",
            "reference_aligner=eflomal",
            "leaderboard=true",
        )
    )
    written = json.loads((out / "aer.json").read_text())
    (row,) = [
        r for r in written["leaderboard"] if r["signal"] == "eflomal (grow-diag-final-and)"
    ]  # in the table, in its place
    assert row["aer"] == written["reference"]["aer"] and row["layer"] is None
    assert [r["aer"] for r in written["leaderboard"]] == sorted(r["aer"] for r in written["leaderboard"])
    default, reference = written["default"], written["reference"]
    assert (default["layer"], default["head"], default["supervised"]) == (1, 1, True)
    assert default["direction"] == "intersection"
    assert default["aer"] == written["layers"]["layer1"]["head1"]["predicting"]["intersection"]["aer"]
    assert reference["aligner"] == "eflomal" and reference["training_pairs"] == 300
    assert reference["gold_pairs_in_training"] == sum((" ".join(s), " ".join(t)) in training for s, t, _ in items)
    assert set(reference["variants"]) == {
        "forward",
        "reverse",
        "intersection",
        "union",
        "grow-diag",
        "grow-diag-final",
        "grow-diag-final-and",
    }
    assert reference["aer"] < 0.2  # the toy corpus is easy for a statistical aligner
    printed = capsys.readouterr().out
    assert (
        "default: layer 1 the supervised head" in printed and "reference: eflomal (grow-diag-final-and): AER" in printed
    )
    assert result["reference"] == reference
    split = align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            f"gold_dir={gold}",
            f"output_dir={tmp_path / 'split'}",
            "reference_aligner=eflomal",
            "leaderboard=true",
            "gold_dev=1",
        )
    )
    (row,) = [r for r in split["leaderboard"] if r["signal"] == "eflomal (grow-diag-final-and)"]
    assert row["dev_aer"] == split["reference"]["dev_aer"] and row["aer"] == split["reference"]["aer"]
    assert [r["dev_aer"] for r in split["leaderboard"]] == sorted(r["dev_aer"] for r in split["leaderboard"])


def test_two_models_one_per_direction_give_symmetrized_links(trained_run, reverse_run, tmp_path, capsys):
    forward = trained_run["run"] / "checkpoints" / "last.ckpt"
    reverse = reverse_run["run"] / "checkpoints" / "last.ckpt"
    both = [f"ckpt_path={forward}", f"reverse_ckpt_path={reverse}"]
    result = align(
        compose_inference(
            "align", *both, "sentence='w1 w2 w3'", "reference='t3 t2 t1'", f"output_dir={tmp_path / 'one'}"
        )
    )
    one = json.loads((tmp_path / "one" / "alignment.json").read_text())
    f, r = ({tuple(p) for p in one[k]} for k in ("forward_links", "reverse_links"))
    assert {tuple(p) for p in one["links"]} == symmetrize(f, r, "grow-diag-final-and")
    assert all(i < 3 and j < 3 for i, j in f | r) and result["pharaoh"] == one["pharaoh"]
    gold = write_gold(
        tmp_path / "gold",
        [
            (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
            (["w4", "w5"], ["t5", "t4"], "1-2 2p1"),
        ],
    )
    out = tmp_path / "aer"
    scored = align(
        compose_inference("align", *both, f"gold_dir={gold}", "symmetrize=intersection", f"output_dir={out}")
    )
    written = json.loads((out / "aer.json").read_text())
    soft = {f"{m}@{x:g}" for m in SOFT for x in {*THRESHOLDS, SOFT_THRESHOLD}}
    assert set(written["by_method"]) == {"forward", "reverse", *METHODS} | soft
    assert written["symmetrized"] == written["by_method"]["intersection"] == scored["symmetrized"]
    assert len((out / "alignment.pharaoh").read_text().splitlines()) == written["n"] == 2
    assert "intersection: AER" in capsys.readouterr().out


def test_two_models_choose_their_symmetrization_on_the_dev_pairs_and_score_the_rest(trained_run, reverse_run, tmp_path):
    both = [
        f"ckpt_path={trained_run['run'] / 'checkpoints' / 'last.ckpt'}",
        f"reverse_ckpt_path={reverse_run['run'] / 'checkpoints' / 'last.ckpt'}",
    ]
    gold = write_gold(
        tmp_path / "gold",
        [
            (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
            (["w4", "w5"], ["t5", "t4"], "1-2 2p1"),
            (["w6", "w7", "w8", "w9"], ["t9", "t8", "t7", "t6"], "1-4 2-3 3-2 4-1"),
        ],
    )
    out = tmp_path / "aer"
    result = align(
        compose_inference(
            "align",
            *both,
            f"gold_dir={gold}",
            "gold_dev=1",
            "symmetrize=soft-mean",
            "symmetrize_threshold=0.25",
            f"output_dir={out}",
        )
    )
    table = result["by_method"]
    assert result["n"] == 2 and result["dev"] == {"first_pairs": 1, "n": 1}
    assert result["symmetrized"] == table["soft-mean@0.25"] and result["symmetrize_threshold"] == 0.25
    best = result["best"]["reading"]
    assert table[best]["dev_aer"] == min(t["dev_aer"] for t in table.values())
    # every figure is of the pairs after the dev pair: alignment.pharaoh's links of them, scored
    g = read_gold(gold, "de", "en", "de")
    lines = (out / "alignment.pharaoh").read_text().splitlines()
    links = [{tuple(map(int, x.split("-"))) for x in line.split()} for line in lines[1:]]
    assert (
        alignment_scores(links, g.sure[1:], g.possible[1:]) | {"dev_aer": table["soft-mean@0.25"]["dev_aer"]}
        == (result["symmetrized"])
    )


def test_symmetrized_links_of_a_pair_whose_sides_differ_in_length(trained_run, reverse_run, tmp_path):
    # the reverse model reads the target and is forced over the source (not over the target again)
    both = [
        f"ckpt_path={trained_run['run'] / 'checkpoints' / 'last.ckpt'}",
        f"reverse_ckpt_path={reverse_run['run'] / 'checkpoints' / 'last.ckpt'}",
    ]
    align(compose_inference("align", *both, "sentence='w1 w2 w3 w4'", "reference='t4 t3'", f"output_dir={tmp_path}"))
    written = json.loads((tmp_path / "alignment.json").read_text())
    assert written["reverse_links"] and all(i < 4 and j < 2 for i, j in written["reverse_links"])


def test_symmetrization_refuses_two_models_of_one_direction_or_of_different_vocabularies(
    trained_run, reverse_run, tmp_path
):
    forward = trained_run["run"] / "checkpoints" / "last.ckpt"
    with pytest.raises(
        UserError,
        match=r"translates de->en, but ckpt_path=.* translates de->en: "
        r"give a checkpoint of the reverse direction, en->de",
    ):
        align(
            compose_inference(
                "align",
                f"ckpt_path={forward}",
                f"reverse_ckpt_path={forward}",
                "sentence='w1'",
                f"output_dir={tmp_path / 'a'}",
            )
        )
    other = torch.load(reverse_run["run"] / "checkpoints" / "last.ckpt", weights_only=True)
    vocab_size = other["qkvmt"]["model_config"]["vocab_size"]
    other["qkvmt"]["tokenizer"] = train_bpe([f"x{i} y{i % 7}" for i in range(400)], vocab_size).to_str()
    torch.save(other, tmp_path / "other.ckpt")
    with pytest.raises(UserError, match=r"have different vocabularies"):
        align(
            compose_inference(
                "align",
                f"ckpt_path={forward}",
                f"reverse_ckpt_path={tmp_path / 'other.ckpt'}",
                "sentence='w1'",
                f"output_dir={tmp_path / 'b'}",
            )
        )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_symmetrizing_reads_each_supervised_model_one_way_as_a_statistical_aligners_runs(
    trained_run, reverse_run, tmp_path
):
    # alone, a supervised head is read in both directions and intersected; two models give
    # their own direction each (target->source), and the symmetrization combines them
    marked = torch.load(reverse_run["run"] / "checkpoints" / "last.ckpt", weights_only=True)
    marked["qkvmt"]["alignment"] = {
        "weight": 1.0,
        "layer": 1,
        "head": 0,
        "full_context": False,
        "labels": "grow-diag-final-and",
    }
    torch.save(marked, tmp_path / "supervised.ckpt")
    align(
        compose_inference(
            "align", f"ckpt_path={tmp_path / 'supervised.ckpt'}", "sentence='t1 t2'", f"output_dir={tmp_path / 'a'}"
        )
    )
    assert json.loads((tmp_path / "a" / "alignment.json").read_text())["policy"]["direction"] == "intersection"
    align(
        compose_inference(
            "align",
            f"ckpt_path={tmp_path / 'supervised.ckpt'}",
            "sentence='t1 t2'",
            "alignment.direction=target_to_source",
            f"output_dir={tmp_path / 'c'}",
        )
    )
    assert json.loads((tmp_path / "c" / "alignment.json").read_text())["policy"]["direction"] == "target_to_source"
    forward = trained_run["run"] / "checkpoints" / "last.ckpt"
    align(
        compose_inference(
            "align",
            f"ckpt_path={forward}",
            f"reverse_ckpt_path={tmp_path / 'supervised.ckpt'}",
            "sentence='w1 w2'",
            "reference='t2 t1'",
            f"output_dir={tmp_path / 'b'}",
        )
    )
    mixed = json.loads((tmp_path / "b" / "alignment.json").read_text())
    assert mixed["symmetrize"] == "grow-diag-final-and"  # auto: one of the two has no supervised head
    policies = mixed["policies"]
    assert policies["reverse"] == {
        "layer": 1,
        "head": 0,
        "rows": "predicting",
        "direction": "target_to_source",
        "signal": "weights",
    }
    assert policies["forward"]["direction"] == "target_to_source"


def test_gold_first_reads_a_gold_set_written_either_way_round(reverse_run, tmp_path):
    """The same gold links, written German-first (RWTH's way, the default) and English-first
    with gold_first=en, score an en->de checkpoint alike."""
    pairs = [(["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3p1"), (["w4", "w5"], ["t5", "t4"], "1-2 2-1")]
    german_first = write_gold(tmp_path / "de_first", pairs)
    english_first = write_gold(
        tmp_path / "en_first",
        [
            (d, e, " ".join(f"{j}{sep}{i}" for i, sep, j in ((item[0], item[1], item[2:]) for item in talp.split())))
            for d, e, talp in pairs
        ],
    )
    assert (english_first / "alignment.talp").read_text().split("\n")[0] == "3-1 2-2 1p3"
    ckpt = reverse_run["run"] / "checkpoints" / "last.ckpt"
    scored = []
    for name, gold, extra in (("a", german_first, ()), ("b", english_first, ("gold_first=en",))):
        align(
            compose_inference("align", f"ckpt_path={ckpt}", f"gold_dir={gold}", f"output_dir={tmp_path / name}", *extra)
        )
        scored.append(json.loads((tmp_path / name / "aer.json").read_text()))
    assert scored[0]["layers"] == scored[1]["layers"] and scored[0]["direction_of_pair"] == "en->de"
    with pytest.raises(UserError, match="gold_first='fr' is not a language of the checkpoint's pair en->de"):
        align(
            compose_inference(
                "align",
                f"ckpt_path={ckpt}",
                f"gold_dir={english_first}",
                "gold_first=fr",
                f"output_dir={tmp_path / 'c'}",
            )
        )


def test_gold_dev_chooses_on_the_first_pairs_and_scores_on_the_rest(trained_run, tmp_path):
    """gold_dev=1: the best extraction is the one the first pair alone would choose, and its
    figures are those of the other pairs alone."""
    pairs = [
        (["w1", "w2", "w3"], ["t3", "t2", "t1"], "1-3 2-2 3-1"),
        (["w4", "w5"], ["t5", "t4"], "1-2 2p1"),
        (["w2", "w4", "w1"], ["t1", "t4", "t2"], "1-3 2-2 3-1"),
    ]
    ckpt = trained_run["run"] / "checkpoints" / "last.ckpt"
    results = {}
    for name, subset, extra in (("dev", pairs[:1], ()), ("test", pairs[1:], ()), ("split", pairs, ("gold_dev=1",))):
        gold = write_gold(tmp_path / f"gold_{name}", subset)
        results[name] = align(
            compose_inference(
                "align",
                f"ckpt_path={ckpt}",
                f"gold_dir={gold}",
                "leaderboard=true",
                f"output_dir={tmp_path / name}",
                *extra,
            )
        )
    split, fields = results["split"], ("signal", "layer", "head", "rows", "direction")
    assert [split["best"][f] for f in fields] == [results["dev"]["best"][f] for f in fields]
    test_row = next(r for r in results["test"]["leaderboard"] if all(r[f] == split["best"][f] for f in fields))
    assert split["best"]["aer"] == test_row["aer"] and split["best"]["dev_aer"] == results["dev"]["best"]["aer"]
    assert (
        split["n"] == 2 and split["dev"] == {"first_pairs": 1, "n": 1} and split["layers"] == results["test"]["layers"]
    )
    assert [r["dev_aer"] for r in split["leaderboard"]] == sorted(r["dev_aer"] for r in split["leaderboard"])
    # past the gold set: named with its size; not a count at all: refused before the model loads
    refusals = {"3": "gold_dev=3: give how many of the 3 gold pairs", "-1": "gold_dev=-1: give a whole number"}
    for bad in ("3", "-1", "true"):
        with pytest.raises(UserError, match=refusals.get(bad, "gold_dev=true: give a whole number")):
            align(
                compose_inference(
                    "align",
                    f"ckpt_path={ckpt}",
                    f"gold_dir={tmp_path / 'gold_split'}",
                    f"gold_dev={bad}",
                    f"output_dir={tmp_path / 'bad'}",
                )
            )
