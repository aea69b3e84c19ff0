"""intervene.py: the command's edits read from the command line as the typed edits, its files and
translations those of Model.intervene, and bad edits refused in one line, the unknown ones before
the model is loaded."""

import json
import re
from dataclasses import fields
from typing import get_type_hints

import numpy as np
import pytest

import qkvmt
from qkvmt.analysis.edits import EDITS
from qkvmt.errors import UserError
from qkvmt.model.weights_folder import write_weights_folder
from qkvmt.pipeline.intervene import bracketed, edits_of, intervene_command
from tests.commandline import run_script, user_error
from tests.conftest import compose_inference
from tests.model.test_weights_folder import nontrivial_model

SENTENCE = "w1 w2 w3 w4 w5"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A model folder of a tiny untrained model with a toy tokenizer: no training, so the tests stay fast."""
    model, tokenizer, meta = nontrivial_model()
    out = tmp_path_factory.mktemp("intervene") / "model"
    out.mkdir()
    write_weights_folder(model, tokenizer, meta, out)
    return out


def run(folder, out, *edits: str):
    overrides = [f"ckpt_path={folder}", f"sentence='{SENTENCE}'", f"output_dir={out}", "fabric.accelerator=cpu"]
    return intervene_command(compose_inference("intervene", *overrides, *edits))


def sample(hint, i: int) -> object:
    """A value of a field's type as the command line gives it (a list for a tuple); the values
    are checked against a model only when the edit compiles, so any of the type will do (whole
    numbers differ from field to field: a swap of a token with itself is refused at once)."""
    return {int: 2 + i, str: "text"}.get(hint, [0, 1])


@pytest.mark.parametrize("cls", EDITS, ids=lambda c: c.__name__)
def test_every_edit_type_is_read_as_its_dataclass_with_every_field(cls):
    hints = get_type_hints(cls)
    given = {f.name: sample(hints[f.name], i) for i, f in enumerate(fields(cls))}
    (edit,) = edits_of([{cls.__name__.lower(): given}])
    assert edit == cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
    assert type(edit) is cls and edit.layers == (0, 1) and edit.heads == (0, 1)
    (alone,) = edits_of([{cls.__name__.lower(): None}])
    assert alone == cls()  # no fields: the dataclass's defaults


def test_edits_keep_their_order_and_their_values():
    edits = edits_of(
        [{"zero": {"layers": 1, "heads": [0, 1]}}, {"patch": {"donor": "w2 w1", "positions": 0}}, {"swap": {}}]
    )
    assert edits == [qkvmt.Zero(layers=1, heads=(0, 1)), qkvmt.Patch("w2 w1", positions=0), qkvmt.Swap()]


@pytest.mark.parametrize(
    "setting, message",
    [
        ("edits=[{swop: {a: 1}}]", r"^edits\[0\]: no edit 'swop'; use one of swap, zero, patch, knockout$"),
        ("edits=[{swap: {a: 1, c: 2}}]", r"^edits\[0\]\.swap\.c: swap has no such field; .* a, b, what, kind, layers"),
        ("edits=[swap]", r"^edits\[0\]='swap': give one edit as \{name: \{field: value"),
        ("edits=[{swap: {a: 1}, zero: {}}]", r"give one edit as"),
        ("edits=[{swap: 3}]", r"^edits\[0\]\.swap=3: give its fields"),
        ("edits={swap: {a: 1}}", r"give a list of edits in brackets"),
        ("edits=[]", r"^no edits given"),
        ("edits=[{zero: {layers: [0], heads: 1.5}}]", r"^Zero\.heads=1\.5: give a whole number or a list of whole"),
        ("edits=[{patch: {donor: w1, positions: 1.0}}]", r"^Patch\.positions=1\.0: give a whole number or a list"),
        ("edits=[{zero: {layers: '12'}}]", r"^Zero\.layers='12': give a whole number or a list of whole numbers"),
        ("edits=[{zero: {heads: [0, true]}}]", r"^Zero\.heads=\[0, True\]: give a whole number or a list"),
        ("edits=[{swap: {a: 1.5}}]", r"^Swap\.a=1\.5: give a whole number$"),
        ("edits=[{knockout: {query: '3'}}]", r"^Knockout\.query='3': give a whole number$"),
        ("edits=[{swap: {what: [keys]}}]", r"^Swap\.what=\['keys'\]: give text$"),
        ("edits=[{swap: {a: 3, b: 3}}]", r"^Swap\.a=Swap\.b=3: pick two different source tokens to swap$"),
        ("study=swap", r"^study=swap measures a corpus of its own edits: leave sentence= and edits= unset$"),
    ],
)
def test_a_bad_edit_is_refused_before_the_model_is_loaded(setting, message, tmp_path):
    missing = tmp_path / "no-such-model"  # loading it would fail: the edit's error comes first
    with pytest.raises(UserError, match=message):
        run(missing, tmp_path / "out", setting)
    assert not (tmp_path / "out").exists()


def test_the_files_and_translations_are_model_intervenes(folder, tmp_path, capsys):
    metrics = run(folder, tmp_path / "out", "edits=[{swap: {a: 0, b: 3, what: keys, layers: [-1]}}]")
    saved = json.loads((tmp_path / "out" / "intervention.json").read_text(encoding="utf-8"))
    assert (tmp_path / "out" / "intervention.html").is_file() and metrics["output_dir"] == str(tmp_path / "out")
    expected = qkvmt.load(folder, device="cpu").intervene(SENTENCE, qkvmt.Swap(0, 3, "keys", layers=(-1,)))
    assert (saved["original"], saved["edited"]) == (expected.original, expected.edited)
    assert saved["edits"] == [
        {"edit": "Swap", "kind": "cross", "layers": [-1], "heads": None, "a": 0, "b": 3, "what": "keys"}
    ]
    assert np.allclose(saved["log_prob_edited"], expected.log_prob_edited, atol=1e-5)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"original: {expected.original}"
    assert out[1] == f"edited:   {bracketed(expected.edited, expected.changed)}"
    shown = float(re.search(r"\(([-+][\d.]+)\)$", out[2]).group(1))
    assert shown == pytest.approx(metrics["log_prob_change"], abs=5e-4) and out[-1] == f"wrote {tmp_path / 'out'}"


def test_swapping_keys_and_values_together_leaves_the_translation(folder, tmp_path):
    metrics = run(folder, tmp_path / "out", "edits=[{swap: {a: 0, b: 3, what: both}}]")
    assert metrics["edited"] == metrics["original"] and metrics["changed_words"] == 0
    assert abs(metrics["log_prob_change"]) < 1e-3


def test_changed_words_are_bracketed_a_run_at_a_time():
    assert bracketed("A green dog is running .", [False, True, False, True, True, False]) == (
        "A [green] dog [is running] ."
    )
    assert bracketed("a b", [True, True]) == "[a b]" and bracketed("", []) == ""


@pytest.mark.parametrize(
    "edit, said",
    [
        ("edits=[{swop: {a: 1}}]", "error: edits[0]: no edit 'swop'; use one of swap, zero, patch, knockout"),
        ("edits=[{swap: {a: 1, c: 2}}]", "error: edits[0].swap.c: swap has no such field; its fields are a, b, what"),
        ("edits=[{swap: {a: 0, b: 60}}]", "error: Swap.b=60 does not exist: the source tokens are 0.."),
    ],
)
def test_a_bad_edit_on_the_command_line_is_one_line_and_writes_nothing(edit, said, folder, tmp_path):
    where = [f"output_dir={tmp_path / 'out'}", f"paths.log_dir={tmp_path / 'outputs'}"]
    r = run_script("intervene", f"ckpt_path={folder}", f"sentence={SENTENCE}", edit, *where)
    assert user_error(r).startswith(said) and r.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no output folder, not even a partial one
