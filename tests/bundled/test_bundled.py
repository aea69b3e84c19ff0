"""The models that ship with qkvmt: found by name wherever a model is asked for, listed by
qkvmt.pretrained(), results written outside the package, and their recorded scores true."""

import pytest
import torch

import qkvmt
import qkvmt.bundled as bundled
from qkvmt.model.weights_folder import add_provenance, write_weights_folder
from qkvmt.pipeline.inspect_attention import inspect_attention
from qkvmt.text.metrics import score
from qkvmt.text.sources import TextFiles
from tests.conftest import MULTI30K, compose_inference, requires_multi30k
from tests.model.test_weights_folder import nontrivial_model, outputs

PROVENANCE = {
    "experiment": "toy",
    "test": {"split": "test", "bleu": 12.5, "chrf": 30.25},
    "steps": 7,
    "train_wall_s": 120.0,
    "machine": {"summary": "2 cores, a test machine"},
}


@pytest.fixture
def shelf(tmp_path, monkeypatch):
    """A bundled-model shelf holding one toy model, `toy-de-en`, in place of the package's own."""
    model, tokenizer, meta = nontrivial_model()
    folder = tmp_path / "shelf" / "toy-de-en"
    folder.mkdir(parents=True)
    write_weights_folder(model, tokenizer, meta, folder, "float16")
    add_provenance(folder, PROVENANCE)
    monkeypatch.setattr(bundled, "HERE", folder.parent)
    return {"model": model, "folder": folder}


def test_a_name_opens_the_bundled_folder_and_an_existing_path_wins(shelf, tmp_path, monkeypatch):
    assert bundled.resolve("toy-de-en") == shelf["folder"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "toy-de-en").mkdir()  # a folder of the user's with the same name
    assert bundled.resolve("toy-de-en") == bundled.Path("toy-de-en")
    assert bundled.resolve("unknown") == bundled.Path("unknown")


def test_pretrained_lists_each_model_with_its_recorded_scores(shelf):
    (listed,) = qkvmt.pretrained()
    assert (listed.name, listed.src_lang, listed.tgt_lang, listed.test_bleu, listed.steps) == (
        "toy-de-en",
        "de",
        "en",
        12.5,
        7,
    )
    assert listed.provenance == PROVENANCE and "toy-de-en" in repr(listed)


def test_load_by_name_is_the_stored_model(shelf):
    model = qkvmt.load("toy-de-en", device="cpu")
    assert repr(model).endswith("; the bundled model toy-de-en>")  # a name, not where the package is installed
    diff = (outputs(model.transformer) - outputs(shelf["model"])).abs().max().item()
    assert diff < 1e-2  # float16 storage: rounded weights, nothing else


class FolderOf:
    """A path-like object of the user's own: it has `__fspath__` and nothing else."""

    def __init__(self, path):
        self.path = path

    def __fspath__(self) -> str:
        return str(self.path)


SENTENCES = ["w1 w2 w3", "w7 w8 w9 w10"]


@pytest.mark.parametrize("spec", ["entry", "Path", "PathLike", "relative Path"])
def test_load_takes_a_pretrained_entry_and_any_path_like_as_the_name(shelf, spec, tmp_path, monkeypatch):
    by_name = qkvmt.load("toy-de-en", device="cpu")
    (entry,) = qkvmt.pretrained()
    monkeypatch.chdir(shelf["folder"].parent)
    given = {
        "entry": entry,
        "Path": entry.folder,
        "PathLike": FolderOf(entry.folder),
        "relative Path": bundled.Path("toy-de-en"),
    }[spec]
    model = qkvmt.load(given, device="cpu")
    assert repr(model) == repr(by_name)  # the bundled model, named as by its name
    assert torch.equal(outputs(model.transformer), outputs(by_name.transformer))
    assert model.translate(SENTENCES) == by_name.translate(SENTENCES)
    assert bundled.resolve(given).resolve() == shelf["folder"]


def test_something_that_is_no_path_is_refused_saying_what_a_model_is(shelf):
    (entry,) = qkvmt.pretrained()
    for wrong in (3, [entry.folder], None):
        with pytest.raises(TypeError, match=r"a path, a bundled model's name or an entry of qkvmt.pretrained\(\)"):
            qkvmt.load(wrong, device="cpu")


def test_a_commands_results_go_under_outputs_not_into_the_package(shelf, tmp_path):
    result = inspect_attention(
        compose_inference(
            "inspect_attention", "ckpt_path=toy-de-en", f"paths.log_dir={tmp_path / 'outputs'}", "sentence='w1 w2 w3'"
        )
    )
    out = bundled.Path(result["output_dir"])
    assert out.parent == tmp_path / "outputs" / "pretrained" / "toy-de-en" / "inspections"
    assert sorted(p.name for p in shelf["folder"].iterdir()) == ["model.safetensors", "qkvmt.json", "tokenizer.json"]


def test_an_unknown_name_is_one_line_listing_the_bundled_ones(shelf):
    with pytest.raises(qkvmt.UserError, match=r"bundled model's name \(toy-de-en\)"):
        qkvmt.load("toy-en-fr", device="cpu")


# ---------------------------------------------------------------------- the models that ship


def test_the_bundled_models_fit_the_budget_and_hold_no_pickle():
    names = bundled.bundled_names()
    assert {"multi30k-de-en", "multi30k-en-de"} <= set(names), "the default de->en model and en->de ship with qkvmt"
    size = sum(p.stat().st_size for name in names for p in (bundled.HERE / name).iterdir())
    assert size <= 25e6
    for name in names:
        assert sorted(p.name for p in (bundled.HERE / name).iterdir()) == [
            "model.safetensors",
            "qkvmt.json",
            "tokenizer.json",
        ]


def test_each_shipped_entry_of_pretrained_loads_and_translates_as_its_name():
    for entry in qkvmt.pretrained():
        by_name = qkvmt.load(entry.name, device="cpu")
        sentence = {"de": "Ein Mann fährt Fahrrad .", "en": "A man rides a bike ."}[entry.src_lang]
        for given in (entry, entry.folder, FolderOf(entry.folder)):
            model = qkvmt.load(given, device="cpu")
            assert repr(model) == repr(by_name)
            assert model.translate([sentence]) == by_name.translate([sentence])


@requires_multi30k
@pytest.mark.slow
@pytest.mark.parametrize("name", ["multi30k-de-en", "multi30k-en-de"])
def test_a_bundled_model_scores_what_its_metadata_says(name):
    """Decoding the test split again gives the BLEU recorded for the stored weights. Another
    CPU's kernels (AVX2 against AMX) round sums differently and can flip a few beam choices,
    hence a small tolerance rather than equality."""
    info = next(p for p in qkvmt.pretrained() if p.name == name)
    torch.manual_seed(0)
    model = qkvmt.load(name, device="cpu")
    src, refs = TextFiles(MULTI30K).read(info.test_split, info.src_lang, info.tgt_lang)
    assert len(src) == info.provenance["test"]["n"]
    scores = score(model.translate(src), refs)
    assert scores["signatures"]["bleu"] == info.provenance["test"]["signatures"]["bleu"]
    assert scores["bleu"] == pytest.approx(info.test_bleu, abs=0.3)
    assert scores["chrf"] == pytest.approx(info.test_chrf, abs=0.3)
