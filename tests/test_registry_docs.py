"""Every list of signals, kinds of attention and alignment settings a user reads agrees with the
registries: qkvmt.analysis.signals.SIGNALS, qkvmt.analysis.trace.KINDS and the values
qkvmt.alignment.policy accepts. docs/analysis.md's tables are generated from them (checked in
tests/record/test_committed_pages.py); this checks the lists written by hand around them: the
docs, the commands' configs (what `--help` prints), the scripts' docstrings and the pages'
JavaScript. A signal registered, renamed or dropped fails here until each list says so."""

import re

import pytest

from qkvmt.alignment.policy import DIRECTIONS, ROWS, cross_signals
from qkvmt.analysis.signals import SIGNALS
from qkvmt.analysis.trace import KINDS
from tests.conftest import ROOT
from tests.test_docs import doc_lines, user_docs

NUMBERS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
WORD = r"[A-Za-z_][A-Za-z0-9_]*"


def texts() -> dict[str, list[str]]:
    """Every text a user reads that may name signals, kinds or settings, by file: the user docs,
    conf/*.yaml (their comments are what `--help` shows), scripts/*.py and the command-line
    module, and the pages' scripts."""
    files = [p for p in user_docs() if p.is_file()]
    files += sorted((ROOT / "conf").rglob("*.yaml")) + sorted((ROOT / "scripts").glob("*.py"))
    files += [
        ROOT / "src" / "qkvmt" / "cli" / "hydra_main.py",
        *sorted((ROOT / "src" / "qkvmt" / "results" / "scripts").glob("*.js")),
    ]
    files += sorted((ROOT / "src" / "qkvmt" / "explore").glob("*.py"))
    return {p.relative_to(ROOT).as_posix(): doc_lines(p) for p in files if p.is_file()}


def named(pattern: str) -> list[tuple[str, int, str]]:
    """(file, line, name) of each name `pattern`'s group 1 captures, in every text."""
    return [
        (path, number, m.group(1))
        for path, lines in texts().items()
        for number, line in enumerate(lines, 1)
        for m in re.finditer(pattern, line)
    ]


def unknown(found, allowed) -> list[str]:
    return [f"{path}:{n}: {name!r}" for path, n, name in found if name not in allowed]


# Each way a text names one signal, kind or setting value: as a setting, a call's argument or a key.
SIGNAL_NAMED = [
    rf"\bsignal=({WORD})",
    rf"\"signal\": \"({WORD})\"",
    rf"\bmap\(\"?{WORD}\"?, \"({WORD})\"\)",
    rf"\bsignals=\[?({WORD})",
    rf"\bsignals=\[[^\]]*?,\s*({WORD})",
]
SIGNAL_LISTED = rf"\b(?:leaderboard_)?signals: null\s+#.*?\[((?:{WORD},?\s*)+)\]"


@pytest.mark.parametrize("pattern", SIGNAL_NAMED)
def test_every_signal_a_text_names_is_registered(pattern):
    found = [f for f in named(pattern) if f[2] not in ("null", "None", "signal")]
    assert not unknown(found, SIGNALS), f"signals not in the registry ({', '.join(SIGNALS)}):\n" + "\n".join(
        unknown(found, SIGNALS)
    )


def test_the_configs_examples_of_signals_are_registered_and_of_the_cost_they_say():
    align = (ROOT / "conf" / "align.yaml").read_text(encoding="utf-8")
    faith = (ROOT / "conf" / "faithfulness.yaml").read_text(encoding="utf-8")
    examples = {}
    for text in (align, faith):
        for key, listed in re.findall(rf"^({WORD}): null\s+#.*?\[([^\]]+)\]", text, re.M):
            examples[key] = [n.strip() for n in listed.split(",")]
    assert set(examples) == {"leaderboard_signals", "signals"}, examples
    assert all(n in cross_signals() for names in examples.values() for n in names), examples
    # "slow, many passes each": the leaderboard's extra signals are those a pass leaves out
    assert all(SIGNALS[n].cost == "passes" for n in examples["leaderboard_signals"])
    (signal_comment,) = re.findall(r"^\s+signal: weights\s+#.*\(([^;)]*)", align, re.M)
    said = [n.strip() for n in signal_comment.split(",") if n.strip() != "..."]
    assert said and set(said) <= set(cross_signals()), said


@pytest.mark.parametrize(
    "pattern, allowed",
    [
        (rf"\bkind=\"?({WORD})", KINDS),
        (rf"\balignment\.rows=({WORD})", ROWS),
        (rf"\balignment\.direction=({WORD})", DIRECTIONS),
        (rf"\"direction\": \"({WORD})\"", DIRECTIONS),
        (rf"\"rows\": \"({WORD})\"", ROWS),
    ],
)
def test_every_kind_rows_and_direction_a_text_names_is_accepted(pattern, allowed):
    found = [f for f in named(pattern) if f[2] not in ("null", "None", "kind", "KIND", "NAME")]
    assert not unknown(found, allowed), "\n".join(unknown(found, allowed))


@pytest.mark.parametrize(
    "setting, values",
    [
        ("alignment.signal", lambda: cross_signals()),
        ("alignment.rows", lambda: list(ROWS)),
        ("alignment.direction", lambda: list(DIRECTIONS)),
        ("kind", lambda: list(KINDS)),
    ],
)
def test_an_error_a_doc_quotes_lists_every_value_the_command_accepts(setting, values):
    """reliability.md and others quote the one-line errors, `use one of ...` included: the quoted
    list names every value the command accepts now, in the command's order, and no other."""
    pattern = rf"{re.escape(setting)}='?{WORD}'?: use one of ((?:{WORD}, )*{WORD})"
    quoted = [
        (path, n, m.group(1))
        for path, lines in texts().items()
        for n, line in enumerate(lines, 1)
        for m in re.finditer(pattern, line)
    ]
    wrong = [f"{path}:{n}: {listed}" for path, n, listed in quoted if listed.split(", ") != list(values())]
    assert not wrong, f"quoted lists that are not {', '.join(values())}:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "conf, key, values",
    [
        ("align.yaml", "direction", DIRECTIONS),
        ("align.yaml", "rows", ROWS),
        ("inspect_attention.yaml", "kind", KINDS),
    ],
)
def test_a_settings_help_names_every_value_it_takes(conf, key, values):
    """The comment beside a setting (what `--help` prints) names each accepted value, and no other
    of the same family."""
    text = (ROOT / "conf" / conf).read_text(encoding="utf-8")
    (comment,) = re.findall(rf"^\s*{key}: [^#\n]*#(.*)$", text, re.M)
    words = set(re.findall(WORD, comment))
    family = {"direction": DIRECTIONS + ("source_to_source", "target_to_target"), "rows": ROWS, "kind": KINDS}[key]
    assert set(values) <= words, f"conf/{conf} {key}: the comment leaves out {set(values) - words}"
    assert not (words & set(family)) - set(values)


def test_a_count_of_signals_or_kinds_is_the_registrys():
    """'three signals' in a page is a list that lags: any count a text gives is the registry's."""
    counts = {"signals": len(SIGNALS), "kinds of attention": len(KINDS)}  # "two directions" is a language pair
    wrong = []
    for path, lines in texts().items():
        for n, line in enumerate(lines, 1):
            for number, what in re.findall(rf"\b({'|'.join(NUMBERS)}|\d+) ({'|'.join(counts)})\b", line, re.I):
                if NUMBERS.get(number.lower(), number) not in (counts[what], str(counts[what])):
                    wrong.append(f"{path}:{n}: {number} {what} (registered: {counts[what]})")
    assert not wrong, "\n".join(wrong)


def test_the_pages_scripts_label_a_signal_as_the_registry_does():
    """The viewer's own option for the weights (and any other it writes out) carries the registry's label."""
    pairs = [
        (path, n, name, label)
        for path, lines in texts().items()
        if path.endswith(".js")
        for n, line in enumerate(lines, 1)
        for name, label in re.findall(r"\[\"(\w+)\", \"([^\"]+)\"\]", line)
        if name in SIGNALS
    ]
    assert pairs, "the viewer's scripts no longer write the weights' option: check this test still reads them"
    wrong = [f"{p}:{n}: {name!r} labelled {label!r}" for p, n, name, label in pairs if label != SIGNALS[name].label]
    assert not wrong, "\n".join(wrong)


def test_the_checks_find_a_lagging_list(monkeypatch, tmp_path):
    """The patterns catch what they are for: an unregistered signal, a count that lags, a stale quote."""
    page = tmp_path / "page.md"
    page.write_text(
        "Read `alignment.signal=saliency`, three signals, `kind=self`.\n"
        "error: alignment.signal='x': use one of weights, value_norms, alti\n",
        encoding="utf-8",
    )
    import tests.test_registry_docs as me

    monkeypatch.setattr(me, "user_docs", lambda: [page])
    monkeypatch.setattr(me, "ROOT", tmp_path)
    assert unknown(named(SIGNAL_NAMED[0]), SIGNALS) == ["page.md:1: 'saliency'"]
    assert unknown(named(rf"\bkind=\"?({WORD})"), KINDS) == ["page.md:1: 'self'"]
    with pytest.raises(AssertionError, match="three signals"):
        test_a_count_of_signals_or_kinds_is_the_registrys()
    with pytest.raises(AssertionError, match=r"page\.md:2: weights, value_norms, alti"):
        test_an_error_a_doc_quotes_lists_every_value_the_command_accepts("alignment.signal", cross_signals)
