"""init_from a Hugging Face folder: a random Marian model whose SentencePiece pair is trained on the toy corpus,
fine-tuned with its own tokenizer and settings, and its run's checkpoints self-contained."""

import gzip
import io
import json
import logging
import shutil

import pytest
import torch
from hydra.utils import instantiate

import qkvmt
from qkvmt.data.batching import TokenizedCorpus
from qkvmt.errors import UserError
from qkvmt.hf.tokenizers import load_tokenizer
from qkvmt.loading import load_checkpoint
from qkvmt.model.checkpoint import model_weights
from qkvmt.pipeline.train import train
from qkvmt.pipeline.translate import translate
from qkvmt.text.tokenizer import encode, encode_target
from qkvmt.training.init_from import MAY_DIFFER
from tests.commandline import run_script
from tests.conftest import compose_inference, compose_train, tiny_overrides, training_fixture, write_corpus
from tests.pipeline.test_train import logged, read_csv

pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

from tests.hf.test_languages import m2m100_folder  # noqa: E402  (needs transformers)
from tests.hf.test_tokenizers import whole_marian_folder  # noqa: E402


def lines(corpus, split: str, lang: str) -> list[str]:
    return gzip.decompress((corpus / f"{split}.{lang}.gz").read_bytes()).decode().splitlines()


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    """The toy corpus and a Marian folder (random weights) whose tokenizer is trained on its training split."""
    base = tmp_path_factory.mktemp("marian")
    corpus = write_corpus(base / "corpus")
    texts = {lang: lines(corpus, "train", lang) for lang in ("de", "en")}
    folder, _, _ = whole_marian_folder(base / "opus-mt-toy", texts=texts)
    return {"corpus": corpus, "folder": folder}


def fine_tuned(corpus, folder, out, *more: str, steps: int = 2, model: str = "init_from"):
    """qkvmt train init_from=<folder> model=init_from on the toy corpus."""
    overrides = [o for o in tiny_overrides(corpus, out, steps=steps, val_every=2) if o != "model=tiny"]
    return train(compose_train(*overrides, f"model={model}", f"init_from={folder}", "module.warmup_steps=1", *more))


@training_fixture(scope="module")
def still_run(marian, tmp_path_factory):
    """Two steps at lr 0 from a copy of the folder, which is then deleted: the run must not need it."""
    base = tmp_path_factory.mktemp("still")
    copy = shutil.copytree(marian["folder"], base / "opus-mt-copy")
    out = base / "run"
    metrics = fine_tuned(marian["corpus"], copy, out, "module.optimizer.lr=0.0")
    shutil.rmtree(copy)
    return {"run": out, "metrics": metrics}


def test_with_a_zero_lr_the_run_keeps_the_folders_weights_and_tokenizer(marian, still_run):
    out, folder = still_run["run"], marian["folder"]
    before, after = (
        model_weights(load_checkpoint(folder)),
        model_weights(load_checkpoint(out / "checkpoints/last.ckpt")),
    )
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    # the folder's tokenizer files, kept in the run folder, and the ids they give on both sides
    assert all((out / "tokenizer" / p.name).read_bytes() == p.read_bytes() for p in folder.glob("*.spm"))
    model = qkvmt.load(out / "checkpoints" / "last.ckpt", device="cpu")
    theirs = load_tokenizer(folder)
    src, tgt = lines(marian["corpus"], "val", "de"), lines(marian["corpus"], "val", "en")
    assert encode(model.tokenizer, src) == encode(theirs, src)
    assert encode_target(model.tokenizer, tgt) == encode_target(theirs, tgt)
    assert model.transformer.cfg.bos_id == model.transformer.cfg.pad_id and model.transformer.cfg.eos_id == 0
    # the validation split's cached ids: the source cut with source.spm, the target with target.spm
    cached = [TokenizedCorpus(p.parent) for p in (out / "cache").glob("*/tgt_off.npy")]
    sides = [([list(c[i][1]) for i in range(len(c))], [list(c[i][2]) for i in range(len(c))]) for c in cached]
    assert (encode(theirs, src), encode_target(theirs, tgt)) in sides


def test_the_runs_checkpoint_translates_without_the_folder_as_the_folder_does(marian, still_run):
    """The copy it started from is gone; its checkpoint alone translates, with the folder's generation settings."""
    ckpt = load_checkpoint(still_run["run"] / "checkpoints" / "last.ckpt")
    assert "hf_folder" not in ckpt["qkvmt"] and ckpt["qkvmt"]["decode"]["beam_size"] == 4  # the folder's num_beams
    src = lines(marian["corpus"], "test_2016_flickr", "de")[:6]
    tuned_model = qkvmt.load(still_run["run"] / "checkpoints" / "last.ckpt", device="cpu")
    tuned = tuned_model.translate(src)
    assert list(tuned) == list(qkvmt.load(marian["folder"], device="cpu").translate(src))
    assert still_run["metrics"]["steps"] == 2 and still_run["metrics"]["test_bleu"] is not None
    printed = io.StringIO()  # qkvmt translate ckpt_path=<the run's checkpoint>, which decodes with its own settings
    cfg = compose_inference("translate", f"ckpt_path={still_run['run'] / 'checkpoints' / 'last.ckpt'}")
    translate(cfg, stdin=io.StringIO("\n".join(src)), stdout=printed)
    assert printed.getvalue().splitlines() == list(tuned_model.translate(src, settings=instantiate(cfg.decode)))


def test_training_lowers_the_loss_and_a_run_continues_from_its_checkpoint(marian, still_run, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="qkvmt.pipeline.train")
    out = tmp_path / "run"
    fine_tuned(marian["corpus"], marian["folder"], out, "module.optimizer.lr=3e-2", steps=8)
    start = logged(read_csv(still_run["run"]), "val/loss")[-1]  # the folder's model, untrained
    assert logged(read_csv(out), "val/loss")[-1] < start
    # the same command with more steps resumes the run from its last.ckpt
    assert fine_tuned(marian["corpus"], marian["folder"], out, "module.optimizer.lr=3e-2", steps=10)["steps"] == 10
    assert f"resuming from {out / 'checkpoints' / 'last.ckpt'}" in caplog.text
    # init_from its checkpoint: the tokenizer and settings come from the file
    again = tmp_path / "again"
    fine_tuned(marian["corpus"], out / "checkpoints" / "last.ckpt", again, "module.optimizer.lr=0.0")
    first, second = (model_weights(load_checkpoint(p / "checkpoints" / "last.ckpt")) for p in (out, again))
    assert all(torch.equal(first[k], second[k]) for k in first)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+model.d_model=32", r"holds a model with model.d_model=16 but this run asks for model.d_model=32"),
        ("data.src_lang=en", r"translates de->en, but this run's data is en->de"),
        ("data.max_positions=65", r"data.max_positions=65, but init_from=.* has 64 positions"),
    ],
)
def test_settings_that_contradict_the_folder_are_refused_before_anything_is_written(
    marian, tmp_path, override, message
):
    out = tmp_path / "run"
    more = [override, "data.tgt_lang=de"] if override.startswith("data.src_lang") else [override]
    with pytest.raises(UserError, match=message) as refused:
        fine_tuned(marian["corpus"], marian["folder"], out, *more)
    assert "\n" not in str(refused.value) and not out.exists()


def test_a_model_group_of_other_settings_is_refused_naming_model_init_from(marian, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(
        UserError, match=r"model.d_model=16, .* but this run asks for model.d_model=64, .*model=init_from"
    ):
        fine_tuned(marian["corpus"], marian["folder"], out, model="tiny")
    assert not out.exists()


def command_line(corpus, out, *recipe: str) -> list[str]:
    """qkvmt train's arguments as the docs write them (`recipe`), made tiny: one process, one step, the toy
    corpus, and nothing else of the recipe's changed."""
    tiny = tiny_overrides(corpus, out, steps=1, val_every=1)
    tiny = [o for o in tiny if o.split("=")[0] not in ("experiment", "model", "trainer", "paths.output_dir")]
    one_process = ["trainer.devices=1", "trainer.strategy=auto", "trainer.accelerator=cpu", "trainer.precision=32"]
    return [*recipe, *tiny, *one_process, "data.source.download_url=null", f"hydra.run.dir={out}"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe",
    [
        [],  # README: without a GPU, qkvmt train runs the CPU recipe, whose model.* describe its own model
        ["experiment=multi30k_de_en_cpu"],  # docs/training.md
        ["experiment=multi30k_de_en_gpu"],  # a GPU recipe: 4+4 layers, d=256
        ["experiment=multi30k_de_en_cpu_align", "module.alignment.weight=0"],
    ],
    ids=["default", "cpu", "gpu", "cpu_align"],
)
def test_the_documented_fine_tuning_command_trains_the_folders_model_with_the_recipes_dropout(marian, tmp_path, recipe):
    out = tmp_path / "run"
    args = command_line(marian["corpus"], out, *recipe, f"init_from={marian['folder']}", "model=init_from")
    r = run_script("train", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    wanted = load_checkpoint(marian["folder"])["qkvmt"]["model_config"]
    tuned = load_checkpoint(out / "checkpoints" / "last.ckpt")["qkvmt"]["model_config"]
    recipe_model = compose_train(*(recipe or ["experiment=multi30k_de_en_cpu"]), "model=init_from")["model"]
    regularization = {k: recipe_model[k] for k in MAY_DIFFER if k in recipe_model}
    assert "dropout" in regularization and tuned == wanted | regularization
    assert (
        "the experiment's model." in r.stdout + r.stderr
    )  # what the recipe sets and the folder's model replaces is named


def test_a_model_setting_typed_beside_model_init_from_must_agree_with_the_folder(marian, tmp_path):
    out = tmp_path / "run"
    args = command_line(marian["corpus"], out, f"init_from={marian['folder']}", "model=init_from")
    r = run_script("train", *args, "model.positions=rotary")
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2 and len(errors) == 1 and r.stderr.splitlines()[-1] == errors[0], r.stderr
    assert "model.positions=sinusoidal but this run asks for model.positions=rotary" in r.stderr
    assert not out.exists()


def test_a_folder_without_its_tokenizer_files_is_refused_before_anything_is_written(marian, tmp_path):
    folder = shutil.copytree(marian["folder"], tmp_path / "no-tokenizer")
    (folder / "source.spm").unlink()
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"has no tokenizer files"):
        fine_tuned(marian["corpus"], folder, out)
    assert not out.exists()


def test_a_run_folder_of_another_tokenizer_is_refused(marian, tmp_path):
    """A rerun in a folder whose tokenizer is a BPE of its data does not mix the two."""
    out = tmp_path / "run"
    out.mkdir()
    record = {"vocab_size": 120, "min_frequency": 2, "data": "0123456789abcdef0123"}
    (out / "tokenizer.settings.json").write_text(json.dumps(record))
    with pytest.raises(UserError, match=r"the tokenizer there is one trained on that run's data"):
        fine_tuned(marian["corpus"], marian["folder"], out)
    assert not (out / "tokenizer").exists() and not (out / "run.json").exists()


@pytest.mark.slow
def test_an_imported_model_learns_an_alignment_head(marian, tmp_path, caplog):
    """module.alignment on the folder's model: eflomal's links, cut into the folder's own pieces, label it."""
    pytest.importorskip("eflomal", reason="eflomal is not installed")
    caplog.set_level(logging.INFO, logger="qkvmt.data.datamodule")
    out = tmp_path / "run"
    supervision = ["module.alignment.weight=1.0", "module.alignment.layer=-1", "module.alignment.head=1"]
    fine_tuned(marian["corpus"], marian["folder"], out, "module.optimizer.lr=1e-2", *supervision)
    assert "label 300 of 300 training pairs" in caplog.text  # every pair's words group into the folder's pieces
    assert logged(read_csv(out), "train/align_loss")
    meta = load_checkpoint(out / "checkpoints" / "last.ckpt")["qkvmt"]
    assert meta["alignment"]["layer"] == 2 and meta["alignment"]["head"] == 1


@pytest.mark.slow
def test_a_many_to_many_model_is_fine_tuned_on_the_runs_pair(marian, tmp_path):
    """An M2M100 folder fine-tuned en->de: the run's data sets the pair, and the target language is forced
    first in its decoding, as qkvmt.load(folder, src_lang=, tgt_lang=) forces it."""
    folder = tmp_path / "m2m100"
    m2m100_folder(folder, num_beams=2)
    out = tmp_path / "run"
    fine_tuned(marian["corpus"], folder, out, "module.optimizer.lr=0.0", "data.src_lang=en", "data.tgt_lang=de")
    tuned = qkvmt.load(out / "checkpoints" / "last.ckpt", device="cpu")
    german = tuned.tokenizer.language_id("de")
    assert (tuned.meta.src_lang, tuned.meta.tgt_lang, tuned.meta.decode["forced_first_id"]) == ("en", "de", german)
    src = lines(marian["corpus"], "val", "en")[:5]
    out_ids = tuned.translate(src).ids
    assert all(row[0] == german for row in out_ids)
    assert out_ids == qkvmt.load(folder, device="cpu", src_lang="en", tgt_lang="de").translate(src).ids


def test_the_fine_tuned_model_exports_to_a_folder_transformers_translates_as_qkvmt_does(marian, still_run, tmp_path):
    """qkvmt export format=huggingface of the run's checkpoint, the folder it started from deleted: the
    folder's tokenizer files and the run's weights, which transformers' generate translates as qkvmt does."""
    import transformers

    from qkvmt.pipeline.export import export

    ckpt, out = still_run["run"] / "checkpoints" / "last.ckpt", tmp_path / "hf"
    export(compose_inference("export", f"ckpt_path={ckpt}", "format=huggingface", f"output_dir={out}"))
    assert all((out / p.name).read_bytes() == p.read_bytes() for p in marian["folder"].glob("*.spm"))
    ours = qkvmt.load(ckpt, device="cpu")
    hf = transformers.MarianMTModel.from_pretrained(out, local_files_only=True).eval()
    tok = transformers.MarianTokenizer.from_pretrained(str(out))
    src = lines(marian["corpus"], "val", "de")
    with torch.no_grad():
        generated = hf.generate(**tok(src, return_tensors="pt", padding=True))
    translated = tok.batch_decode(generated, skip_special_tokens=True)
    assert translated == list(ours.translate(src)) and any(translated)
