"""results(cfg): the function behind scripts/results.py. Records a run when asked (a training run's
folder, a study's output folder, or a benchmark's hooks stage), then writes the tables of the README,
docs/results.md and the other `pages` from the record, or, with check=true, only says whether they
are what the record gives."""

from pathlib import Path

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.files import write_text
from qkvmt.host.machine import this_machine
from qkvmt.record import from_analysis, from_benchmark, from_folder, from_study, pages, record_file, settings
from qkvmt.setting_types import true_or_false

README_TABLES = (None,)  # the README's one region; docs/results.md may hold any of the tables


def rendered(record: dict, readme: Path, results_page: Path, more: list[Path] = ()) -> dict[Path, tuple[str, str]]:
    """Each page's text now and as the record gives it; raises before anything is written."""
    out = {}
    for path, required in ((readme, README_TABLES), (results_page, ()), *((p, ()) for p in more)):
        if not path.is_file():
            raise UserError(f"{path} not found: run from the repository root, or set readme= / results_page= / pages=")
        text = path.read_text(encoding="utf-8")
        out[path] = text, pages.render(text, record, str(path), required)
    return out


def new_run(cfg: DictConfig, record: dict) -> tuple[dict, dict]:
    """The run in cfg.add as a record entry, compared with its recipe as it is now: a run whose
    settings differ (an older folder) is recorded and listed, never counted for the recipe. A
    study's folder (study.json, sinks.json), or an analysis command's (faithfulness.json, aer.json),
    is recorded as the measurement it is, a benchmark's (benchmark.json) as its hooks stage."""
    text = {k: None if cfg[k] is None else str(cfg[k]) for k in ("id", "hardware", "torch", "commit", "conditions")}
    taken = {r["id"] for r in record["runs"]}
    if any((Path(cfg.add) / name).is_file() for name in ("faithfulness.json", "aer.json")):
        del text["torch"]  # the result says which torch ran it
        return from_analysis.entry(Path(cfg.add), **text, disturbed=cfg.disturbed, of=cfg.of, taken_ids=taken)
    if from_benchmark.benchmark_file(Path(cfg.add)):
        del text["torch"]  # the stage says which torch ran it
        return from_benchmark.entry(Path(cfg.add), Path(cfg.conf_dir), **text, disturbed=cfg.disturbed, taken_ids=taken)
    if from_study.study_file(Path(cfg.add)):
        del text["torch"]  # the study's file says which torch ran it
        return from_study.entry(Path(cfg.add), **text, disturbed=cfg.disturbed, of=cfg.of, taken_ids=taken)
    entry, classes = from_folder.entry(  # str: Hydra reads id=7 or torch=2.13 as numbers, and they are names
        Path(cfg.add),
        this_machine(),
        **text,
        cores=cfg.cores,
        disturbed=cfg.disturbed,
        evaluation=cfg.evaluation,
        taken_ids=taken,
    )
    now = settings.recipe_now(entry["experiment"], entry["overrides"], Path(cfg.conf_dir))
    changed = settings.differences(entry["settings"], now)
    if changed:
        entry.update(settings_current=False, settings_note="; ".join(changed))
    return entry, classes


def results(cfg: DictConfig) -> dict:
    for key in ("check", "disturbed"):
        true_or_false(key, cfg[key])
    if cfg.check and cfg.add:
        raise UserError("check=true writes nothing, so it cannot add a run: give add= or check=true, not both")
    record_path = Path(cfg.record)
    record = record_file.load(record_path)
    entry = None
    if cfg.add:
        entry, classes = new_run(cfg, record)
        record = record_file.add(record, entry, classes)
    texts = rendered(record, Path(cfg.readme), Path(cfg.results_page), [Path(p) for p in cfg.pages])
    stale = [str(p) for p, (now, wanted) in texts.items() if now != wanted]
    if cfg.check:
        if stale:
            raise UserError(
                f"{' and '.join(stale)}: the tables are not what {record_path} gives; run qkvmt results to write them"
            )
        print(f"the tables agree with {record_path} ({len(record['runs'])} runs)")
        return {"runs": len(record["runs"]), "stale": []}
    if entry:
        record_file.save(record_path, record)
    for path in stale:
        write_text(Path(path), texts[Path(path)][1])
    added = entry["id"] if entry else None
    print(
        f"{len(record['runs'])} runs"
        + (f", added {added}" if added else "")
        + ("" if not entry or entry["settings_current"] else f" (not counted: {entry['settings_note']})")
        + (f"; wrote {', '.join(stale)}" if stale else "; the tables were already up to date")
    )
    return {"runs": len(record["runs"]), "added": added, "written": stale}
