"""The documentation runs and reads as a user's: the README's Python API example and
docs/tour.ipynb execute as written on the bundled model, the tour keeps the outputs a fresh run
prints, the README stays a short front page that links every docs page, the attention lesson
reads in 15 minutes, defines each term before it uses it and states only numbers that `qkvmt
figures` or the record of runs gives, and no user doc speaks of how the project is run."""

import json
import re
import subprocess
import sys

import nbformat
import pytest

from qkvmt.cli.table import COMMANDS
from qkvmt.pipeline.tour import executed
from qkvmt.record import record_file
from qkvmt.record.tables import TABLES
from tests.conftest import ROOT, requires_multi30k

README = ROOT / "README.md"
README_MAX_LINES = 200
LESSON = ROOT / "docs" / "attention.md"
HOOKS = ROOT / "docs" / "hooks.md"
NOTEBOOKS = (ROOT / "docs" / "tour.ipynb", ROOT / "docs" / "gender.ipynb")
# 15 minutes at about 200 words a minute. Every word of the page counts, its code blocks included
# (a reader reads them too); a generated table would not, but the lesson has none.
LESSON_MAX_WORDS = 3000
# The terms the lesson defines, each in bold where it is first used (case aside; a plural counts).
LESSON_TERMS = (
    r"tokens?",
    r"encoder",
    r"decoder",
    r"beam",
    r"vectors?",
    r"quer(?:y|ies)",
    r"keys?",
    r"values?",
    r"W_Q",
    r"W_K",
    r"W_V",
    r"scores?",
    r"√d_k",
    r"softmax",
    r"weights?",
    r"mask\w*",
    r"heads?",
    r"W_O",
    r"self-attention",
    r"cross-attention",
    r"log-probabilit(?:y|ies)",
    r"teacher forcing",
    r"activation patching",
    r"BLEU",
    r"chrF",
    r"AER",
)
# Its numbers: the single sentence's are qkvmt figures' (its attention_numbers.json), the rest the
# record's tables of these names, which docs/analysis.md shows.
LESSON_NUMBERS = ROOT / "docs" / "figures" / "attention_numbers.json"
LESSON_RECORD_TABLES = ("kv-study", "ablations", "runs", "sinks")
# Words of the project's process, which a user cannot follow: they belong in git history or
# CHANGELOG.md. Rounds of work and sessions count in prose only, outside code spans (`train.rounds`).
PROCESS_WORDS = re.compile(r"\bissues? #?\d+|\bmoonshots?\b|can_start_another|\$OUT\b|\bdevice tool\b", re.I)
PROCESS_PROSE = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th)|next|last|this|that|"
    r"each|every|another|previous|earlier|later)\s+rounds?\b|\brounds? \d+\b|\bsessions?\b",
    re.I,
)  # not "the other way round"


def user_docs() -> list:
    return [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")), *NOTEBOOKS]


def doc_lines(path) -> list[str]:
    """The lines a reader sees: a notebook's cell sources (its outputs are what the code printed)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [line for c in cells for line in "".join(c["source"]).splitlines()]
    return path.read_text(encoding="utf-8").splitlines()


def process_words(path, root=ROOT) -> list[str]:
    found = []
    for number, line in enumerate(doc_lines(path), 1):
        prose = re.sub(r"`[^`]*`", "", line)
        for m in [*PROCESS_WORDS.finditer(line), *PROCESS_PROSE.finditer(prose)]:
            found.append(f"{path.relative_to(root)}:{number}: {m.group(0)!r} in {line.strip()[:120]!r}")
    return found


def readme_api_example() -> str:
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## Attention for your own sentence") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def python_blocks(page) -> str:
    """A Markdown page's Python blocks, in order, as one program: a reader runs them one after another."""
    return "\n".join(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S))


def test_the_hooks_pages_examples_run_as_written(tmp_path):
    """Every Python block of docs/hooks.md, on the bundled model, in one session as a reader runs them."""
    code = python_blocks(HOOKS)
    assert code.count("model.") >= 10  # the page's examples, not an empty program
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "A woman" in r.stdout  # the hook inside search changed the translation, as the page says


def test_the_readmes_api_example_runs_as_written(tmp_path):
    r = subprocess.run(
        [sys.executable, "-c", readme_api_example()], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "->" in r.stdout  # the example prints what it found
    assert any(tmp_path.rglob("alignment.html"))  # and saves a result


def outputs(cells, kind: str) -> list:
    return [o["data"][kind] for c in cells if c.cell_type == "code" for o in c.outputs if kind in o.get("data", {})]


def printed(cell) -> tuple[dict[str, str], list[str]]:
    """What a code cell printed and showed as text: each stream's text (stdout, stderr; joined,
    however it was flushed), and each result's text/plain in order."""
    streams: dict[str, str] = {}
    for o in cell.outputs:
        if o.output_type == "stream":
            streams[o.name] = streams.get(o.name, "") + o.text
    return streams, [o.data["text/plain"] for o in cell.outputs if "text/plain" in o.get("data", {})]


NUMBER = re.compile(r"-?\d+\.\d+")


def same_printout(now, saved, tolerance: float = 0.015) -> bool:
    """The same text, word for word, and the same decimals to within a unit of their last printed
    digit: another CPU's float rounding may move one, the notebook as it is now may not change any."""
    a, b = repr(now), repr(saved)
    if NUMBER.sub("#", a) != NUMBER.sub("#", b):
        return False
    return all(abs(float(x) - float(y)) <= tolerance for x, y in zip(NUMBER.findall(a), NUMBER.findall(b)))


def test_printouts_match_word_for_word_and_decimals_to_their_last_digit():
    assert same_printout("A man 0.74 -5.07", "A man 0.75 -5.06") and not same_printout("A man 0.74", "A dog 0.74")
    assert not same_printout("log p -5.07", "log p -5.47") and not same_printout("0.74", "0.74 0.10")


@pytest.mark.slow(reason="runs docs/tour.ipynb in a Jupyter kernel: the longest test that does not train")
def test_the_tour_notebook_runs_in_a_kernel():
    """As written, on the bundled model; the file keeps the outputs a code host shows, and they are
    the outputs of the notebook as it is now: `qkvmt figures` (tour=) saves them."""
    path = ROOT / "docs" / "tour.ipynb"
    saved = nbformat.read(path, as_version=4)
    try:
        nb = executed(path)  # as `qkvmt figures` runs it: a fresh kernel in docs/, on the CPU
    except Exception as e:  # nbclient's CellExecutionError names the cell and the traceback
        pytest.fail(f"a cell of docs/tour.ipynb failed:\n{e}")
    for cells, what in ((nb.cells, "run now"), (saved.cells, "as saved in docs/tour.ipynb")):
        code = [c for c in cells if c.cell_type == "code"]
        assert all(c.execution_count for c in code), f"a cell has not run ({what})"
        pages = outputs(cells, "text/html")
        assert len(pages) >= 4 and all(p.startswith("<iframe srcdoc=") for p in pages), what
        assert outputs(cells, "image/png"), f"no static picture of the attention ({what}): a code host shows no iframe"
    stale = stale_cells(nb, saved)
    assert not stale, "docs/tour.ipynb's saved outputs are stale: run `qkvmt figures`\n" + "\n".join(stale)


def stale_cells(nb, saved) -> list[str]:
    """The code cells whose printout now differs from the saved one (same_printout)."""
    return [
        f"cell {i}: saved {printed(old)!r}\n        now {printed(new)!r}"
        for i, (new, old) in enumerate(zip(nb.cells, saved.cells))
        if new.cell_type == "code" and not same_printout(printed(new), printed(old))
    ]


GENDER = ROOT / "docs" / "gender.ipynb"
SHARE_LINE = re.compile(r"^(\S+(?: h\d+)?)\s+(-?\d+\.\d+)$", re.M)


def tagged_printout(nb, tag: str) -> str:
    """What the code cell tagged `tag` printed."""
    cell = next(c for c in nb.cells if tag in c.metadata.get("tags", []))
    return printed(cell)[0].get("stdout", "")


@requires_multi30k
@pytest.mark.slow(reason="runs docs/gender.ipynb in a Jupyter kernel: causal tracing over 191 pairs")
def test_the_gender_notebook_runs_in_a_kernel_and_keeps_its_outputs():
    """As written, on the bundled model and Multi30k's validation set; the file keeps what it prints now."""
    saved = nbformat.read(GENDER, as_version=4)
    try:
        nb = executed(GENDER, timeout=1200)
    except Exception as e:
        pytest.fail(f"a cell of docs/gender.ipynb failed:\n{e}")
    assert all(c.execution_count for c in saved.cells if c.cell_type == "code"), "a saved cell has not run"
    assert outputs(nb.cells, "image/png") and outputs(saved.cells, "image/png"), "no heat map"
    stale = stale_cells(nb, saved)
    assert not stale, "docs/gender.ipynb's saved outputs are stale: run it again and save it\n" + "\n".join(stale)


def test_the_gender_notebooks_slices_and_shares_are_the_records():
    """The top slices the notebook computes, in its saved outputs, are those of the record's latest
    causal-tracing study (`qkvmt patch` on the same pairs), each share within 0.002."""
    found = SHARE_LINE.findall(tagged_printout(nbformat.read(GENDER, as_version=4), "top"))
    run = record_file.load(ROOT / "docs" / "runs.json")
    latest = [r for r in run["runs"] if "tracing_of" in r][-1]["tracing"]["top"][: len(found)]
    assert len(found) >= 5, "the notebook printed no slices"
    assert [s for s, _ in found] == [t["slice"] for t in latest]
    assert [float(v) for _, v in found] == pytest.approx([t["changed"] for t in latest], abs=0.002)


def test_no_user_doc_speaks_of_the_projects_process():
    found = [hit for path in user_docs() if path.is_file() for hit in process_words(path)]
    assert not found, "process words in user docs (history goes to git or CHANGELOG.md):\n" + "\n".join(found)


def test_the_process_word_check_finds_and_places_them(tmp_path):
    doc = tmp_path / "page.md"
    doc.write_text(
        "Fine.\nAs issue 12 says, the seventh round\n`train.rounds` is an option; j → round(j·n/m), "
        "the other way round\n",
        encoding="utf-8",
    )
    hits = process_words(doc, root=tmp_path)
    assert [h.split(": ", 1)[0] for h in hits] == ["page.md:2", "page.md:2"]
    assert "issue 12" in hits[0] and "seventh round" in hits[1]


def test_the_readme_is_a_short_front_page_linking_every_docs_page():
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").iterdir() if p.suffix in (".md", ".ipynb"))
    linked = {target for target, _ in links(README)}
    assert [p for p in pages if p not in linked] == []


def heading_anchors(page) -> set[str]:
    """The anchors a code host gives a Markdown page's headings (GitHub's rule)."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def links(page) -> list[tuple[str, str]]:
    """(target, anchor) of every relative link of a Markdown page, the target as a path from ROOT."""
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        path, _, anchor = target.partition("#")
        out.append(
            (
                (page.parent / path).resolve().relative_to(ROOT).as_posix()
                if path
                else page.relative_to(ROOT).as_posix(),
                anchor,
            )
        )
    return out


def test_every_link_in_the_user_docs_leads_somewhere():
    broken = []
    for page in user_docs():
        if page.suffix != ".md" or not page.is_file():
            continue
        for target, anchor in links(page):
            path = ROOT / target
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} does not exist")
            elif anchor and path.suffix == ".md" and anchor not in heading_anchors(path):
                broken.append(f"{page.relative_to(ROOT)}: {target} has no heading #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_shows_every_command_with_an_example():
    readme = README.read_text(encoding="utf-8")
    for name in COMMANDS:
        assert re.search(rf"`qkvmt {name}( [^`]*)?`", readme), f"README has no example of qkvmt {name}"


def test_the_user_docs_run_every_command_as_a_qkvmt_subcommand():
    """One form throughout: `qkvmt <subcommand>`. A generated table keeps the command its recorded run ran."""
    found = []
    for path in [README, *sorted((ROOT / "docs").glob("*.md")), *NOTEBOOKS]:
        text = "\n".join(doc_lines(path))
        text = re.sub(r"<!-- results:(\S*?)begin -->.*?<!-- results:\1end -->", "", text, flags=re.S)
        found += [f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"python scripts/\w+\.py", text)]
    assert not found, "write these as `qkvmt <subcommand>`:\n" + "\n".join(found)


def generated_tables_aside(text: str) -> str:
    return re.sub(r"<!-- results:(\S*?)begin -->.*?<!-- results:\1end -->", "", text, flags=re.S)


def test_the_attention_lesson_reads_in_fifteen_minutes():
    words = len(generated_tables_aside(LESSON.read_text(encoding="utf-8")).split())
    assert words <= LESSON_MAX_WORDS, f"docs/attention.md has {words} words; the lesson keeps to {LESSON_MAX_WORDS}"


def prose(text: str) -> str:
    """A Markdown page's running text: no title, code blocks, code spans or link targets."""
    text = re.sub(r"```.*?```", "", text.split("\n", 1)[1], flags=re.S)
    return re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", text))


def undefined_terms(text: str, terms) -> list[str]:
    """The terms whose first use in the page's prose is not in bold: used before they are defined."""
    text = prose(text)
    bold = [m.span() for m in re.finditer(r"\*\*.+?\*\*", text)]
    found = []
    for term in terms:
        first = re.search(rf"(?<![\w-]){term}(?![\w-])", text, re.I)
        if not first or not any(a <= first.start() < b for a, b in bold):
            found.append(term if not first else f"{term}: {text[max(0, first.start() - 60) : first.end()]!r}")
    return found


def test_the_attention_lesson_defines_each_term_before_it_uses_it():
    missing = undefined_terms(LESSON.read_text(encoding="utf-8"), LESSON_TERMS)
    assert not missing, "first used without its definition (in bold):\n" + "\n".join(missing)


def test_a_term_used_before_its_bold_definition_is_found():
    page = "# Title\nA key and a value.\n\nA **key** is an address; a **value**, content. `query` and **softmax**."
    assert undefined_terms(page, (r"keys?", r"values?", r"softmax", r"quer(?:y|ies)")) == [
        "keys?: 'A key'",
        "values?: 'A key and a value'",
        "quer(?:y|ies)",
    ]


STATED = re.compile(r"(?<![\w.,])-?\d+(?:\.\d+)?%|(?<![\w.,])-?\d+\.\d+(?![\w.])")  # percentages, decimals


def stated(text: str) -> list[str]:
    """The percentages and decimals a page states, its Python and shell blocks (code) aside."""
    return STATED.findall(re.sub(r"```(?:python|bash)\n.*?```", "", generated_tables_aside(text), flags=re.S))


def leaves(data) -> list:
    """The numbers of a JSON value, however deep."""
    if isinstance(data, dict):
        data = list(data.values())
    if isinstance(data, list):
        return [n for d in data for n in leaves(d)]
    return [data] if isinstance(data, int | float) and not isinstance(data, bool) else []


def size(number: str) -> str:
    """A stated number as it is compared: a percentage as written, a decimal by its size, so that
    a page may say "0.69 BLEU lost" of a change of -0.69, or 0.60 of 0.6."""
    return number if number.endswith("%") else f"{abs(float(number)):g}"


def given(text: str, data) -> set[str]:
    """Every percentage and decimal in `text` and every number in `data` (JSON), by size."""
    return {size(n) for n in STATED.findall(text)} | {size(str(n)) for n in leaves(data)}


def test_stated_numbers_are_the_percentages_and_decimals_outside_code():
    page = "0.75 of 97% (-3.845, 1,000 steps, v2.6.0)\n```python\nx = 0.5\n```\n```\nlog p -1.25\n```"
    assert stated(page) == ["0.75", "97%", "-3.845", "-1.25"]
    assert given("0.60 and 88%", {"a": [-3.845, 1.0]}) == {"0.6", "88%", "3.845", "1"}


def test_every_number_the_lesson_states_is_one_the_figures_or_the_record_give():
    """The single sentence's numbers as `qkvmt figures` wrote them (tests/pipeline/test_figures.py
    checks them against the model), the corpus's and the trainings' as the record's tables give
    them (tests/record/test_committed_pages.py): a number in neither was never run and seen."""
    record = record_file.load(ROOT / "docs" / "runs.json")
    tables = "\n".join(TABLES[name](record) for name in LESSON_RECORD_TABLES)
    known = given(tables, json.loads(LESSON_NUMBERS.read_text(encoding="utf-8")))
    numbers = stated(LESSON.read_text(encoding="utf-8"))
    unknown = [n for n in numbers if size(n) not in known]
    assert numbers and not unknown, (
        f"numbers of docs/attention.md that neither {LESSON_NUMBERS.name} nor the record gives: {unknown}"
    )
