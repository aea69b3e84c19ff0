"""A record entry from a benchmark's output folder: the hooks stage's figures (`qkvmt benchmark
stages=[hooks]`, qkvmt.bench.hooks), each labelled with its goal, and the machine the stage recorded
(recorded_with). The command is `stages=[hooks]` with the settings of the stage's sections that
differ from the packaged configuration's (conf/benchmark.yaml)."""

from pathlib import Path

from omegaconf import OmegaConf

from qkvmt.errors import UserError
from qkvmt.record.from_folder import free_id, read_json
from qkvmt.record.from_study import measured_on, slug

BENCHMARK_FILE = "benchmark.json"
SECTIONS = ("hooks", "imported")  # the settings the hooks stage reads


def benchmark_file(folder: Path) -> Path | None:
    """The benchmark's file in `folder`, if it is a benchmark's output folder."""
    path = Path(folder) / BENCHMARK_FILE
    return path if path.is_file() else None


def command(result: dict, conf_dir: Path) -> str:
    """The command that ran the stage, with the settings it reads that differ from the packaged ones."""
    packaged = OmegaConf.to_container(OmegaConf.load(Path(conf_dir) / "benchmark.yaml"))
    given = [
        f"{section}.{key}={value}"
        for section in SECTIONS
        for key, value in result["config"][section].items()
        if packaged[section].get(key) != value
    ]
    return " ".join(["qkvmt benchmark", f"device={result['config']['device']}", "'stages=[hooks]'", *given])


def figures(h: dict) -> list[dict]:
    """The stage's figures, each label with its goal where it has one."""
    c, s, p, goal = h["cache"], h["search"], h["patch"], h["goals"]
    out = [
        {
            "label": f"run_with_cache of all {c['names']} names, one {c['words']}-word sentence "
            f"(goal ≤ {goal['cache_s']:g} s)",
            "value": round(c["seconds"], 2),
            "unit": "s",
        },
        {
            "label": f"beam {s['beam_size']}, {s['sentences']} sentences, no hooks",
            "value": round(s["plain_s"], 2),
            "unit": "s",
        },
        *(
            {
                "label": f"the same with a hook returning None at {name}, over none "
                f"(goal ≤ {goal['hooked_vs_plain']:g}×)",
                "value": round(x["vs_plain"], 2),
                "unit": "×",
            }
            for name, x in s["hooked"].items()
        ),
    ]
    if "skipped" in p:
        return out
    at = p["seconds"]
    return [
        *out,
        {
            "label": f"patch_study of {p['pairs']} pairs, every cross-attention head and source position, "
            f"translations included (goal ≤ {goal['patch_s'] / 60:g} min)",
            "value": round(at["total"]),
            "unit": "s",
        },
        {"label": f"real patching, {p['passes']:,} patched passes", "value": round(at["patching"], 1), "unit": "s"},
        {"label": "attribution patching", "value": round(at["attribution"], 2), "unit": "s"},
        *(
            []
            if p["patching_vs_attribution"] is None  # attribution too fast to time
            else [
                {
                    "label": f"real patching / attribution patching (goal ≥ {goal['patching_vs_attribution']:g}×)",
                    "value": round(p["patching_vs_attribution"], 1),
                    "unit": "×",
                }
            ]
        ),
        {"label": "correlation of attribution with real patching, every slice", "value": round(p["correlation"], 3)},
    ]


def entry(
    folder: Path,
    conf_dir: Path,
    *,
    id: str | None = None,
    hardware: str | None = None,
    commit: str | None = None,
    conditions: str | None = None,
    disturbed: bool = False,
    taken_ids=(),
) -> tuple[dict, dict]:
    """(entry, the hardware class it needs) for the hooks stage of the benchmark in `folder`."""
    result = read_json(Path(folder) / BENCHMARK_FILE, "give add= the output folder of qkvmt benchmark")
    if "hooks" not in result:
        raise UserError(
            f"{Path(folder) / BENCHMARK_FILE} holds no hooks stage: add= records a benchmark's hooks stage "
            "(qkvmt benchmark 'stages=[hooks]')"
        )
    h = result["hooks"]
    measured, classes = measured_on(h, hardware, commit, conditions, disturbed)
    model = result["config"]["hooks"]["ckpt_path"]
    run = {
        "id": id or free_id(f"hooks-{slug(model)}", taken_ids),
        **measured,
        "kind": "benchmark",
        "how_measured": "hooks",
        "shown_in": "hooks",
        "what": f"the hooks API's goals: run_with_cache and hooked search on a Marian of OPUS-MT-base's shape "
        f"(random weights), patch_study of {model}",
        "command": command(result, conf_dir),
        "figures": figures(h),
    }
    return run, classes
