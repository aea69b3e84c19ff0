"""The benchmark's hooks stage (qkvmt.bench.hooks): scripts/benchmark.py stages=[hooks] on a small Marian
shape reports run_with_cache of every name, search with and without a hook at each site it names, and
patch_study of the pairs made of the validation sources, each figure beside its goal and the machine it
ran on, and `qkvmt results add=` records them; without such pairs it says why it left patch_study out.
No figure is held to its goal here."""

import gzip
import json

import pytest

import qkvmt
from qkvmt.bench.hooks import ARTICLES, GOALS, HOOKED, SWAP
from qkvmt.studies.patching.pairs import aligned, swapped_word_pairs
from tests.bench.test_imported import SHAPE
from tests.commandline import run_python, user_error
from tests.conftest import CONF, write_corpus
from tests.record.conftest import RECORD

pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[hf]')")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed (pip install -e '.[hf]')")

GERMAN = [
    "Ein Mann schläft auf einem Sofa .",
    "Zwei Hunde spielen im Schnee .",
    "Der Mann fährt Fahrrad .",
    "Ein Mann mit einem roten Hut singt .",
    "Ein Kind lacht .",
]
ENGLISH = ["A man sleeps on a sofa .", "Two dogs play in the snow .", "The man rides a bike .", "A man sings .", "."]
TINY = ["stages=[hooks]", "hooks.repeats=1", "hooks.sentences=2", "hooks.words=5", "imported.spm_vocab=60"]


def bench(tmp_path, *overrides, val=None):
    corpus = write_corpus(tmp_path / "corpus")
    for lang, lines in (val or {}).items():
        (corpus / f"val.{lang}.gz").write_bytes(gzip.compress("".join(f"{x}\n" for x in lines).encode()))
    args = ["scripts/benchmark.py", "device=cpu", f"output_dir={tmp_path / 'bench'}", f"data.root={corpus}"]
    proc = run_python(*args, f"data.cache_dir={tmp_path / 'cache'}", *SHAPE, *TINY, *overrides)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((tmp_path / "bench" / "benchmark.json").read_text())["hooks"], proc.stdout


def test_the_hooks_stage_reports_every_figure_beside_its_goal_and_the_machine(tmp_path):
    h, table = bench(tmp_path, "hooks.pairs=2", val={"de": GERMAN, "en": ENGLISH})
    assert h["goals"] == GOALS and h["machine"]["cores"] >= 1 and h["threads"] >= 1
    c = h["cache"]
    assert c["kept"] == c["names"] and c["seconds"] > 0  # every name cached
    s = h["search"]
    assert s["sentences"] == 2 and s["beam_size"] == 5 and set(s["hooked"]) == set(HOOKED)
    assert all(x["vs_plain"] > 0 < x["seconds"] for x in s["hooked"].values())
    model = qkvmt.load("multi30k-de-en", device="cpu")
    kept, _ = aligned(model.tokenizer, *swapped_word_pairs(GERMAN, SWAP, ARTICLES), "skip")
    p = h["patch"]
    assert p["given"] == min(2, len(kept)) >= p["pairs"] >= 1  # the first pairs of as many tokens
    assert p["passes"] > 0 and -1 <= p["correlation"] <= 1 and p["seconds"]["total"] > 0
    assert "hooks: run_with_cache of all" in table and "patch_study of" in table and "goal" in table
    recorded(tmp_path, h)


def recorded(tmp_path, h):
    """qkvmt results add= of the benchmark's folder: its figures with their goals, in the page's hooks table."""
    (tmp_path / "runs.json").write_text(json.dumps(RECORD | {"methods": RECORD["methods"] | {"hooks": "the stage"}}))
    (tmp_path / "README.md").write_text("<!-- results:begin -->\n<!-- results:end -->\n")
    page = tmp_path / "benchmark.md"
    page.write_text("<!-- results:hooks:begin -->\n<!-- results:hooks:end -->\n")
    paths = [f"{k}={tmp_path / v}" for k, v in (("record", "runs.json"), ("readme", "README.md"))]
    proc = run_python(
        "-m",
        "qkvmt",
        "results",
        *paths,
        f"results_page={page}",
        "pages=[]",
        f"conf_dir={CONF}",
        f"add={tmp_path / 'bench'}",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (entry,) = json.loads((tmp_path / "runs.json").read_text())["runs"]
    assert (entry["id"], entry["kind"], entry["how_measured"], entry["date"]) == (
        "hooks-multi30k-de-en-1",
        "benchmark",
        "hooks",
        h["date"],
    )
    assert entry["command"].startswith("qkvmt benchmark device=cpu 'stages=[hooks]' hooks.words=5 hooks.repeats=1")
    cache = entry["figures"][0]
    assert cache["value"] == round(h["cache"]["seconds"], 2) and "(goal ≤ 1 s)" in cache["label"]
    ratio = f"real patching / attribution patching (goal ≥ 20×) | {h['patch']['patching_vs_attribution']:.1f}×"
    assert "run_with_cache of all" in page.read_text() and (ratio in page.read_text()) == (
        h["patch"]["patching_vs_attribution"] is not None
    )


def test_without_pairs_in_the_data_patch_study_is_left_out_and_said_so(tmp_path):
    h, table = bench(tmp_path)  # the toy corpus: no "Mann"
    assert h["patch"] == {"skipped": "no validation source holds Mann with as many tokens once swapped"}
    assert h["cache"]["seconds"] > 0 and h["search"]["plain_s"] > 0  # the other figures stay
    assert "patch_study: left out, no validation source holds Mann" in table


def test_a_benchmark_folder_without_the_hooks_stage_is_refused_in_one_line_and_the_record_left_alone(tmp_path):
    (tmp_path / "runs.json").write_text(json.dumps(RECORD))
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps({"stages": ["serve"], "serve": {}}))
    proc = run_python("-m", "qkvmt", "results", f"record={tmp_path / 'runs.json'}", f"add={bench}")
    assert user_error(proc) == (
        f"error: {bench / 'benchmark.json'} holds no hooks stage: add= records a benchmark's hooks stage "
        "(qkvmt benchmark 'stages=[hooks]')"
    )
    assert json.loads((tmp_path / "runs.json").read_text()) == RECORD
