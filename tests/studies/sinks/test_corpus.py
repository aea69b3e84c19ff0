"""Model.sinks: each cross-attention layer's and head's share of a row's weight on </s> and on
punctuation, forced on the references and over the model's own translations, checked against the
maps of Model.attention with the sink columns picked here, on real sentences and the bundled model."""

import numpy as np
import pytest

import qkvmt
from qkvmt.errors import UserError

SOURCES = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Ein Boston Terrier läuft über saftig-grünes Gras vor einem weißen Zaun.",
    "",  # no source: left out, as is a pair without a reference
    "Ein Mädchen in einem Karateanzug bricht einen Stock mit einem Tritt.",
]
REFERENCES = [
    "A man in an orange hat starring at something.",
    "A Boston Terrier is running on lush green grass in front of a white fence.",
    "Nothing here.",
    "A girl in karate uniform breaking a stick with a front kick.",
]
PAIRS = [(s, r) for s, r in zip(SOURCES, REFERENCES) if s]
MARKS = set(".,;:!?-'\"()")  # every punctuation character these sentences hold


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


def picked(cols: list[str]) -> dict[str, np.ndarray]:
    """The test's own columns: `</s>` by name, punctuation as tokens of MARKS only, the word-start mark aside."""
    eos = np.array([c == "</s>" for c in cols])
    punctuation = np.array([bool(c.replace("▁", "")) and set(c.replace("▁", "")) <= MARKS for c in cols])
    return {"eos": eos, "punctuation": punctuation, "sinks": eos | punctuation}


def row_shares(maps: list, part: str, heads: bool = True) -> np.ndarray:
    """Every row's share on `part`, the rows of all sentences side by side, averaged: (L, H), or
    (L,) of the layers' maps (the heads' average)."""
    per_row = [(m.weights if heads else m.layers)[..., picked(m.cols)[part]].sum(-1) for m in maps]  # (L[, H], T)
    return np.concatenate(per_row, axis=-1).mean(-1)


def study_array(readings: list[dict], part: str) -> np.ndarray:
    return np.array([[h[part] for h in layer["heads"]] for layer in readings])


def test_each_share_is_the_mean_of_every_rows_weight_on_its_columns(model):
    result = model.sinks(SOURCES, REFERENCES).result
    forced = [model.attention(s, r, signals="weights").map("cross") for s, r in PAIRS]
    own = model.translate([s for s, _ in PAIRS])
    free = [model.attention(s, signals="weights") for s, _ in PAIRS]  # forcing the ids model.translate generates
    assert [a.target for a in free] == list(own)
    free = [a.map("cross") for a in free]
    assert result["n"] == len(PAIRS) and result["decode"] == own.settings
    assert result["rows"] == {"forced": sum(len(m.rows) for m in forced), "free": sum(len(m.rows) for m in free)}
    for reading, maps in (("forced", forced), ("free", free)):
        found = result["readings"][reading]
        for part in ("eos", "punctuation", "sinks"):
            np.testing.assert_allclose(study_array(found, part), row_shares(maps, part), atol=1e-6)
            np.testing.assert_allclose([layer[part] for layer in found], row_shares(maps, part, False), atol=1e-6)
    assert 0 < result["readings"]["forced"][-1]["punctuation"] < result["readings"]["forced"][-1]["sinks"] < 1


def on_itself(maps: list, heads: bool = True) -> np.ndarray:
    """Every self-attention row's weight on its own position (the map's diagonal), the rows of all
    sentences side by side, averaged: (L, H), or (L,) of the layers' maps."""
    per_row = [np.diagonal(m.weights if heads else m.layers, axis1=-2, axis2=-1) for m in maps]  # (L[, H], T)
    return np.concatenate(per_row, axis=-1).mean(-1)


def test_each_self_attention_share_is_the_mean_weight_a_query_puts_on_its_own_position(model):
    result = model.sinks(SOURCES, REFERENCES).result
    forced = [model.attention(s, r, signals="weights") for s, r in PAIRS]
    free = [model.attention(s, signals="weights") for s, _ in PAIRS]
    for reading, passes in (("forced", forced), ("free", free)):
        for kind in ("encoder", "decoder"):
            maps = [p.map(kind) for p in passes]
            found = result["self"][reading][kind]
            heads = [[h["own"] for h in layer["heads"]] for layer in found]
            np.testing.assert_allclose(heads, on_itself(maps), atol=1e-6)
            np.testing.assert_allclose([layer["own"] for layer in found], on_itself(maps, False), atol=1e-6)
        # The decoder reads nothing after a query: its diagonal is the query's own token, the last it may read.
        assert all(not np.triu(p.map("decoder").weights, 1).any() for p in passes)
    assert result["self"]["forced"]["encoder"] == result["self"]["free"]["encoder"]  # one source, both readings
    assert 0 < result["self"]["forced"]["decoder"][0]["own"] < 1


def test_the_first_n_pairs_with_both_sides_and_decoding_keywords_are_heeded(model):
    result = model.sinks(SOURCES, REFERENCES, n=2, beam_size=1).result
    free = [model.attention(s, signals="weights", beam_size=1).map("cross") for s, _ in PAIRS[:2]]
    assert result["n"] == 2 and result["decode"]["beam_size"] == 1
    np.testing.assert_allclose(study_array(result["readings"]["free"], "sinks"), row_shares(free, "sinks"), atol=1e-6)


def test_the_result_shows_itself_and_saves_its_three_files(model, tmp_path):
    found = model.sinks(SOURCES[:1], REFERENCES[:1])
    assert found._repr_html_().startswith("<iframe")
    found.save(tmp_path / "out")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"sinks.json", "sinks.md", "sinks.png"}
    layer = found.result["readings"]["free"][2]
    text = (tmp_path / "out" / "sinks.md").read_text()
    assert f"| 2 | {100 * found.result['readings']['forced'][2]['eos']:.1f}%" in text
    assert f"| 2 | 3 | {100 * found.result['readings']['forced'][2]['heads'][3]['eos']:.1f}%" in text
    assert f"{100 * layer['sinks']:.1f}% |\n" in text
    forced, free = (found.result["self"][r]["decoder"][1]["own"] for r in ("forced", "free"))
    assert f"| decoder | 1 | {100 * forced:.1f}% | {100 * free:.1f}% |" in text


@pytest.mark.parametrize(
    "sources, references, n, message",
    [
        ([], [], 10, r"^sources is empty: give at least one sentence$"),
        (SOURCES, REFERENCES[:3], 10, r"^references has 3 lines, the source has 4: give one per source$"),
        (SOURCES, REFERENCES, 0, r"^n=0: give a whole number of at least 1$"),
        ("Ein Hund .", ["A dog ."], 10, r"^sources is a list of sentences: give \[text, \.\.\.\], not one text$"),
        ([""], ["A dog ."], 10, r"^no pair has both a source and a reference"),
    ],
)
def test_bad_input_is_one_line_before_any_translation(model, monkeypatch, sources, references, n, message):
    monkeypatch.setattr(model, "translate", lambda *a, **k: pytest.fail("translated before checking"))
    with pytest.raises(UserError, match=message):
        model.sinks(sources, references, n=n)
