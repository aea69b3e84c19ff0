"""results(cfg): the function behind scripts/results.py. Records a run when asked, then writes the
README's and docs/results.md's tables from the record, or, with check=true, only says whether
they are what the record gives."""

import os
from pathlib import Path

from omegaconf import DictConfig

from qkvmt.errors import UserError
from qkvmt.files import write_text
from qkvmt.record import from_folder, pages, runs

README_TABLES = (None,)  # the README's one region; docs/results.md may hold any of the tables


def this_machine() -> dict:
    """What a run folder does not record, read from the machine adding it (torch only then: the
    tables alone need none)."""
    import torch

    from qkvmt.training.hardware import detect

    return {"hardware": detect().to_dict(), "cores": os.cpu_count(), "amx": bool(torch.cpu._is_amx_tile_supported()),
            "torch": torch.__version__}


def rendered(record: dict, readme: Path, results_page: Path) -> dict[Path, tuple[str, str]]:
    """Each page's text now and as the record gives it; raises before anything is written."""
    out = {}
    for path, required in ((readme, README_TABLES), (results_page, ())):
        if not path.is_file():
            raise UserError(f"{path} not found: run from the repository root, or set readme= / results_page=")
        text = path.read_text(encoding="utf-8")
        out[path] = text, pages.render(text, record, str(path), required)
    return out


def results(cfg: DictConfig) -> dict:
    record_path = Path(cfg.record)
    record = runs.load(record_path)
    added = None
    if cfg.add:
        entry, classes = from_folder.entry(
            Path(cfg.add), this_machine(), id=cfg.id, hardware=cfg.hardware, cores=cfg.cores, torch=cfg.torch,
            commit=cfg.commit, conditions=cfg.conditions, disturbed=cfg.disturbed, evaluation=cfg.evaluation,
            taken_ids={r["id"] for r in record["runs"]},
        )
        record, added = runs.add(record, entry, classes), entry["id"]
    texts = rendered(record, Path(cfg.readme), Path(cfg.results_page))
    stale = [str(p) for p, (now, wanted) in texts.items() if now != wanted]
    if cfg.check:
        if cfg.add:
            raise UserError("check=true writes nothing, so it cannot add a run: give add= or check=true, not both")
        if stale:
            raise UserError(f"{' and '.join(stale)}: the tables are not what {record_path} gives; "
                            "run python scripts/results.py to write them")
        print(f"the tables agree with {record_path} ({len(record['runs'])} runs)")
        return {"runs": len(record["runs"]), "stale": []}
    if added:
        runs.save(record_path, record)
    for path in stale:
        write_text(Path(path), texts[Path(path)][1])
    print(f"{len(record['runs'])} runs" + (f", added {added}" if added else "")
          + (f"; wrote {', '.join(stale)}" if stale else "; the tables were already up to date"))
    return {"runs": len(record["runs"]), "added": added, "written": stale}
