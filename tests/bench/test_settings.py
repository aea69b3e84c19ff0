"""The benchmark's own settings (qkvmt.bench.settings) are checked before any stage runs: a bad one
is one line naming it as the user gave it, and leaves no output folder; a run's folder appears whole
or not at all (qkvmt.files.StagedFolder, as the benchmark stages its output_dir)."""

import pytest
from hydra import compose, initialize_config_dir

from qkvmt.bench.settings import SECTIONS, check_settings
from qkvmt.files import StagedFolder
from tests.commandline import run_script, user_error
from tests.conftest import CONF


def benchmark_config(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("benchmark", overrides=list(overrides))


@pytest.mark.parametrize("mode", ["full", "quick"])
def test_every_setting_of_the_configuration_is_checked_and_its_defaults_pass(mode):
    cfg = benchmark_config(f"mode={mode}", "stages=[peers,memory,imported,serve,corpus,hooks]")
    for section, keys in SECTIONS.items():
        assert set(cfg[section]) == set(keys), section  # a new setting in benchmark.yaml needs its check
    check_settings(cfg)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["serve.repeats=0"], "serve.repeats=0: give the timed runs of each, a whole number of at least 1"),
        (["serve.repeats=-1"], "serve.repeats=-1: give"),
        (["serve.clients=-1"], "serve.clients=-1: give the concurrent clients"),
        (["serve.clients=abc"], "serve.clients='abc': give the concurrent clients, a whole number"),
        (["serve.per_request=abc"], "serve.per_request='abc': give the sentences of each request"),
        (["serve.per_request=0"], "serve.per_request=0: give"),
        (["serve.beam_size=0"], "serve.beam_size=0: give the beams"),
        (["serve.sentences=-5"], "serve.sentences=-5: give"),
        (["serve.sentences=2.5"], "serve.sentences=2.5: give"),
        (["~serve.repeats"], "serve.repeats is missing: give serve.repeats="),
        (["seed=-1"], "seed=-1: give the seed of every system's weights and batches, a whole number of at least 0"),
        (["+serve.foo=1"], "serve.foo: no such setting of the benchmark; the settings under serve are ckpt_path,"),
        (["+corpus.foo=1"], "corpus.foo: no such setting of the benchmark; the settings under corpus are pairs,"),
        (["serve.ckpt_path=no/such/model", "stages=[serve]"], "serve.ckpt_path=no/such/model: no such file"),
        (["corpus.pairs=0"], "corpus.pairs=0: give the sentence pairs to make"),
        (["corpus.vocab=0"], "corpus.vocab=0: give the distinct words"),
        (
            ["corpus.mean_words=-1"],
            "corpus.mean_words=-1: give the mean words of a sentence, a number above 0, e.g. 25",
        ),
        (["corpus.mean_words=nan"], "corpus.mean_words=nan: give"),
        (["corpus.max_words=0"], "corpus.max_words=0: give the most words"),
        (["corpus.max_words=20"], "corpus.max_words=20 with corpus.mean_words=25: give corpus.max_words above"),
        (["corpus.vocab_size=abc"], "corpus.vocab_size='abc': give the BPE's vocabulary size"),
        (
            ["corpus.vocab_size=4"],
            "corpus.vocab_size=4: give the BPE's vocabulary size, a whole number of at least 5, e.g. 37000",
        ),
        (["corpus.tokenizer_sample=-1"], "corpus.tokenizer_sample=-1: give"),
        (["corpus.max_tokens=0"], "corpus.max_tokens=0: give"),
        (["systems=[ours,foo]"], "systems=['ours', 'foo']: give some of ours, ours_align, torch, hf"),
        (["stages=serve"], "stages='serve': give some of peers, memory, imported, serve, corpus, hooks"),
        (["compile=maybe"], "compile='maybe': give true or false"),
        (["sdpa_backend=fast"], "sdpa_backend='fast': give auto, null or one of"),
        (["peak_tflops=abc"], "peak_tflops='abc': give the device's bf16 peak in TFLOP/s"),
        (["train.steps=2", "train.rounds=3"], "train.rounds=3 with train.steps=2: give at most as many rounds"),
        (["decode.length=1"], "decode.length=1: give the tokens each sentence decodes, EOS included"),
        (["decode.ctranslate2=[int4]"], "decode.ctranslate2=['int4']: give a list of CTranslate2 compute types"),
        (["scaling.lengths=[0,32]"], "scaling.lengths=[0, 32]: give a list of output lengths"),
        (["scaling.uncached=maybe"], "scaling.uncached='maybe': give true or false"),
        (["memory.every=500", "memory.steps=300"], "memory.every=500 with memory.steps=300: give memory.every at"),
        (["memory.experiment=nope", "stages=[memory]"], "memory.experiment=nope: no such recipe; use one of"),
        (["imported.heads=7"], "imported.d_model=512 with imported.heads=7: give a d_model that the heads divide"),
        (["imported.explorer_words=[22,18]"], "imported.explorer_words=[22, 18]: give the fewest and the most words"),
        (["hooks.pairs=0"], "hooks.pairs=0: give the clean/corrupt pairs patch_study traces, a whole number"),
        (["hooks.ckpt_path=no/such/model", "stages=[hooks]"], "hooks.ckpt_path=no/such/model: no such file"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it_and_leaves_no_folder(tmp_path, overrides, message):
    out = tmp_path / "runs" / "bench"
    proc = run_script("benchmark", "device=cpu", f"output_dir={out}", *overrides)
    assert user_error(proc).startswith(f"error: {message}")
    assert not (tmp_path / "runs").exists()


def test_an_output_dir_holding_files_is_refused_and_left_as_it_was(tmp_path):
    (tmp_path / "benchmark.json").write_text("{}")
    proc = run_script("benchmark", "device=cpu", f"output_dir={tmp_path}")
    assert user_error(proc) == (
        f"error: output_dir={tmp_path} already holds files: "
        "give a new or empty folder (results are never mixed with older ones)"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["benchmark.json"]


def staged(final):
    return StagedFolder(final.parent, final.name, final=lambda: final)  # as qkvmt.pipeline.benchmark stages


def test_a_run_that_fails_leaves_no_folder_and_one_that_ends_leaves_its_files_alone(tmp_path):
    final = tmp_path / "outputs" / "benchmark" / "now"
    with pytest.raises(RuntimeError), staged(final) as out:
        (out / "tokenizer.json").write_text("{}")  # a stage's file, written before another stage fails
        raise RuntimeError("a stage failed")
    assert list(tmp_path.iterdir()) == []  # not even outputs/benchmark/, made for this run
    with staged(final) as out:
        (out / "benchmark.json").write_text("{}")
        assert not final.exists()  # in place only once every stage has run
    assert [p.name for p in final.parent.iterdir()] == ["now"] and (final / "benchmark.json").read_text() == "{}"
