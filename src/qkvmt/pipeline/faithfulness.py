"""faithfulness(cfg): every signal's cross-attention readings scored on a split by deleting, and
keeping only, the source tokens each ranks highest for a target token
(qkvmt.analysis.faithfulness); a table, a plot, and the AER of an align.py leaderboard beside
them."""

import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from qkvmt.analysis.faithfulness import cross_signals, forced_inputs, readings, score, summarize
from qkvmt.bundled import bundled_name
from qkvmt.errors import UserError
from qkvmt.files import atomic_write, write_json, write_text
from qkvmt.model.inputs import fits
from qkvmt.pipeline.evaluate import read_inputs
from qkvmt.pipeline.runs import StagedOutput, check_output_dir, load_for_inference
from qkvmt.text.tokenizer import encode

BASELINE = (
    "a deleted source token's id becomes <pad>: the encoder and every cross-attention mask it as a key, "
    "the other tokens keep their ids and positions, and </s> is never deleted"
)
INTERVAL = "95% interval over sentences, normal approximation: mean ± 1.96·s/√n"


def settings(cfg: DictConfig) -> tuple[list[str], list[float]]:
    """The signals and levels asked for; every bad setting is a UserError, before any work."""
    known = cross_signals()
    names = known if cfg.signals is None else [str(s) for s in OmegaConf.to_object(cfg.signals)]
    for name in names:
        if name not in known:
            raise UserError(
                f"signals: {name!r} is not a signal with cross-attention maps: use some of {', '.join(known)}"
            )
    if not names:
        raise UserError(f"signals=[]: name at least one of {', '.join(known)}")
    levels = OmegaConf.to_object(cfg.levels) if OmegaConf.is_list(cfg.levels) else [cfg.levels]
    if not levels or any(isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1 for f in levels):
        raise UserError(f"levels={levels}: give fractions of the source tokens in (0, 1], e.g. [0.1,0.2,0.3,0.4,0.5]")
    for key in ("n", "targets_per_sentence", "random_draws"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
            raise UserError(f"{key}={cfg[key]!r}: give a whole number, 1 or more")
    return names, [float(f) for f in levels]


def read_leaderboard(path: str | None) -> list[dict] | None:
    """The leaderboard of an aer.json that `qkvmt align gold_dir=... leaderboard=true` wrote."""
    if path is None:
        return None
    try:
        board = json.loads(Path(path).read_text(encoding="utf-8")).get("leaderboard")
    except (OSError, ValueError, AttributeError) as e:
        raise UserError(f"aer_file={path} is not readable as the aer.json of qkvmt align ({e})") from None
    if not isinstance(board, list):
        raise UserError(
            f"aer_file={path} has no leaderboard: write it with qkvmt align gold_dir=<dir> leaderboard=true"
        )
    return board


def aer_of(board: list[dict], signal: str, layer: int | None) -> dict | None:
    """A reading's AER: the layer as a whole (head "mean") at the rows and direction that align.py
    ranked best for it (its leaderboard is best first); a whole-model signal's, any layer."""
    for row in board:
        if row.get("signal") == signal and row.get("head") == "mean" and (layer is None or row.get("layer") == layer):
            return {k: row[k] for k in ("aer", "layer", "head", "rows", "direction") if k in row}
    return None


def pairs_of(tokenizer, src: list[str], refs: list[str], n: int, max_positions: int) -> tuple[list, dict]:
    """The first n pairs of subword ids with a source and a reference that fit the model's
    positions, and how many were passed over, and why."""
    skipped, out = {"empty": 0, "too_long": 0}, []
    for s, r in zip(src, refs):
        if len(out) == n:
            break
        if not (s.strip() and r.strip()):
            skipped["empty"] += 1
            continue
        ids = encode(tokenizer, [s, r])
        if not all(fits(len(i), max_positions) for i in ids):
            skipped["too_long"] += 1
            continue
        out.append(ids)
    return out, skipped


def faithfulness(cfg: DictConfig) -> dict:
    start = time.time()
    names, levels = settings(cfg)
    board = read_leaderboard(cfg.aer_file)
    check_output_dir(cfg)
    model = load_for_inference(cfg)
    src, refs, name = read_inputs(cfg, model.meta, model.paths[0])
    if not any(r.strip() for r in refs):
        raise UserError(
            f"{name} has no references: faithfulness forces the reference translation; give a split "
            "or src_file/ref_file with translations"
        )
    t = model.transformer
    pairs, skipped = pairs_of(model.tokenizer, src, refs, cfg.n, t.cfg.max_positions)
    if not pairs:
        raise UserError(
            f"{name}: no pair has a source and a reference that fit the model's {t.cfg.max_positions} positions"
        )
    sentences, seconds = scored_sentences(cfg, t, pairs, names, levels)
    summary = summarize(sentences)
    for row in summary["readings"]:
        row["aer"] = aer_of(board, row["signal"], row["layer"]) if board is not None else None
    result = {
        "model": bundled_name(model.paths[0]) or str(model.paths[0]),
        "checkpoints": [str(p) for p in model.paths],
        "split": name,
        "n": len(sentences),
        "skipped": skipped,
        "levels": levels,
        "signals": names,
        "targets_per_sentence": cfg.targets_per_sentence,
        "random_draws": cfg.random_draws,
        "seed": cfg.seed,
        "baseline": BASELINE,
        "interval": INTERVAL,
        "aer_file": cfg.aer_file,
        **summary,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "wall_s": round(time.time() - start, 1),
    }
    table = markdown(result)
    staged = StagedOutput(cfg, model.paths, name, kind="faithfulness")
    with staged as out:
        write_json(out / "faithfulness.json", result)
        write_text(out / "faithfulness.md", table)
        plot(result, out / "faithfulness.png")
    print(table, end="")
    print(
        f"{len(sentences)} sentences in {result['wall_s']:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items())
        + f"); wrote {staged.final}"
    )
    return result | {"output_dir": str(staged.final)}


def scored_sentences(cfg: DictConfig, t, pairs: list, names: list[str], levels: list[float]) -> tuple[list, Counter]:
    """Each pair's readings scored at its randomly drawn target tokens, and the seconds spent,
    by what they were spent on."""
    sentences, seconds = [], Counter()
    for i, (s, r) in enumerate(tqdm(pairs, desc="faithfulness", unit="sentence", file=sys.stderr, dynamic_ncols=True)):
        rng = np.random.default_rng([cfg.seed, i])  # a sentence's draws do not depend on the others
        rows = sorted(rng.choice(len(r), size=min(cfg.targets_per_sentence, len(r)), replace=False).tolist())
        orders = np.stack([rng.permutation(len(s)) for _ in range(cfg.random_draws)])
        x = forced_inputs(t, s, r[: rows[-1] + 1])  # the causal decoder's rows read no later target token: stop there
        maps = readings(t, x, names, rows, seconds)
        begin = time.perf_counter()
        sentences.append(score(t, x, maps, rows, levels, orders))
        seconds["edited passes"] += time.perf_counter() - begin
    return sentences, seconds


def _mean_ci(m: dict) -> str:
    return f"{m['mean']:.3f}" + (f" [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]" if m["ci95"] else "")


def markdown(result: dict) -> str:
    """The table: each reading's AOPCs and sufficiency (nats of log p lost), and its AER where a
    leaderboard was given."""
    with_aer = result["aer_file"] is not None
    head = "| reading | deletion AOPC ↑ | reversed AOPC | sufficiency ↓ |" + (
        " AER (rows, direction) |" if with_aer else ""
    )
    lines = [
        f"Faithfulness of {result['model']} on {result['split']}: {result['n']} sentences, "
        f"{result['targets_per_sentence']} target tokens each, levels {result['levels']}; "
        f"drops of log p in nats, {INTERVAL}.",
        "",
        head,
        "|---" * (head.count("|") - 1) + "|",
    ]
    for r in result["readings"]:
        aer = r["aer"]
        cell = (
            (f" {aer['aer']:.3f} ({aer['rows']}, {aer['direction']}) |" if aer else " not in the leaderboard |")
            if with_aer
            else ""
        )
        lines.append(
            f"| {r['label']} | {_mean_ci(r['deletion_aopc'])} | {_mean_ci(r['reversed_aopc'])} | "
            f"{_mean_ci(r['sufficiency'])} |{cell}"
        )
    lines += [
        "",
        f"Random order ({result['random_draws']} draws a sentence): deletion AOPC {_mean_ci(result['random_aopc'])}.",
    ]
    if not with_aer:
        lines.append("AER: give aer_file=<aer.json of qkvmt align gold_dir=<dir> leaderboard=true> for this model.")
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    """Deletion AOPC with its interval per reading (reversed as a hollow mark), random as a line."""
    rows = result["readings"]
    fig = Figure(figsize=(7, 1.5 + 0.32 * len(rows)), layout="constrained")
    FigureCanvasAgg(fig)  # its own canvas: no pyplot state
    ax = fig.subplots()
    y = np.arange(len(rows))[::-1]
    for key, style in (
        ("deletion_aopc", {"fmt": "o", "color": "C0", "label": "deletion AOPC"}),
        ("reversed_aopc", {"fmt": "o", "color": "C7", "mfc": "none", "label": "reversed"}),
    ):
        means = np.array([r[key]["mean"] for r in rows])
        ci = np.array([r[key]["ci95"] or [r[key]["mean"]] * 2 for r in rows])
        ax.errorbar(means, y, xerr=np.abs(ci.T - means), capsize=3, **style)
    random = result["random_aopc"]
    ax.axvline(random["mean"], color="C3", linestyle="--", label="random order")
    if random["ci95"]:
        ax.axvspan(*random["ci95"], color="C3", alpha=0.15)
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=8)
    ax.set_xlabel("drop of log p, mean over levels (nats)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", ncols=3)  # below the axes: no reading hidden
    fig.suptitle(f"Faithfulness: {result['model']}, {result['split']}, {result['n']} sentences", fontsize=10)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=100))
