"""How every command that decodes takes its decoding settings (pipeline.runs.decode_overrides):
decode=default gives each of its fields over the checkpoint's own, as before; decode=checkpoint
decodes as the model's folder or checkpoint says, any decode.* typed beside it taking precedence;
with either engine; and a bad decode.* is refused before any model loads.

The bundled model stores max_tokens=1024 where decode=default says 4096, so the settings a command
records or serves tell whose were used; a length limit typed on the command line shows in the text."""

import http.client
import json
import re
import sys
from dataclasses import asdict

import pytest
from hydra.utils import instantiate

import qkvmt
from qkvmt.export.ctranslate2_engine import load_ctranslate2
from tests.commandline import ROOT, run_python, server_process, user_environment, user_error
from tests.conftest import compose_inference
from tests.serve.conftest import post

SENTENCE = "Ein Mann fährt Fahrrad ."
SOURCES = [SENTENCE, "Zwei Hunde spielen im Schnee ."]
REFERENCES = ["A man rides a bike .", "Two dogs play in the snow ."]
SHORT = {"max_len_a": 0, "max_len_b": 3}  # typed on the command line: at most three tokens
DEFAULT = instantiate(compose_inference("translate").decode)  # what decode=default has always built
# each way to give the settings: the command line, and the settings a model decodes by for it
CASES = {
    "default": (["decode=default"], lambda model: model.decoding(DEFAULT)),
    "checkpoint": (["decode=checkpoint"], lambda model: model.decoding()),
    "checkpoint-typed": (
        ["decode=checkpoint", *(f"decode.{k}={v}" for k, v in SHORT.items())],
        lambda model: model.decoding(**SHORT),
    ),
}


@pytest.fixture(scope="module")
def model():
    return qkvmt.load("multi30k-de-en", device="cpu")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    pytest.importorskip("ctranslate2", reason="the [deploy] extra (ctranslate2) is not installed")
    out = tmp_path_factory.mktemp("export") / "ct2"
    r = run_python("-m", "qkvmt", "export", "ckpt_path=multi30k-de-en", "format=ctranslate2", f"output_dir={out}")
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def qkvmt_command(*argv: str):
    r = run_python("-m", "qkvmt", *argv)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_the_bundled_models_own_settings_differ_from_decode_default(model):
    """What lets the tests below tell the checkpoint's settings from decode=default's."""
    assert model.decoding() != model.decoding(DEFAULT)


@pytest.mark.parametrize("case", CASES)
def test_translate(model, case):
    given, settings = CASES[case]
    r = qkvmt_command("translate", "ckpt_path=multi30k-de-en", f"sentence={SENTENCE}", *given)
    assert r.stdout.splitlines() == list(model.translate([SENTENCE], settings(model)))


@pytest.mark.parametrize("case", CASES)
def test_translate_with_ctranslate2(exported, case):
    given, settings = CASES[case]
    r = qkvmt_command("translate", "engine=ctranslate2", f"model_dir={exported}", f"sentence={SENTENCE}", *given)
    engine = load_ctranslate2(exported)
    assert r.stdout.splitlines() == list(engine.translate([SENTENCE], settings(engine)))


@pytest.mark.parametrize("case", CASES)
def test_evaluate_records_the_settings_it_decoded_by(model, case, tmp_path):
    given, settings = CASES[case]
    src, ref, out = tmp_path / "s.de", tmp_path / "r.en", tmp_path / "out"
    src.write_text("".join(s + "\n" for s in SOURCES))
    ref.write_text("".join(r + "\n" for r in REFERENCES))
    files = [f"src_file={src}", f"ref_file={ref}", f"output_dir={out}", "attention.num_samples=0"]
    qkvmt_command("evaluate", "ckpt_path=multi30k-de-en", *files, *given)
    assert json.loads((out / "metrics.json").read_text())["decode"] == asdict(settings(model))
    assert (out / "hypotheses.txt").read_text().splitlines() == list(model.translate(SOURCES, settings(model)))


def test_heads_decodes_the_checkpoints_settings_made_greedy(model, tmp_path):
    """heads' own decode.beam_size=1 (conf/heads.yaml) over the checkpoint's."""
    src, ref, out = tmp_path / "s.de", tmp_path / "r.en", tmp_path / "out"
    src.write_text(SENTENCE + "\n")
    ref.write_text(REFERENCES[0] + "\n")
    files = [f"src_file={src}", f"ref_file={ref}", f"output_dir={out}", f"paths.log_dir={tmp_path / 'outputs'}"]
    qkvmt_command(
        "heads", "ckpt_path=multi30k-de-en", "decode=checkpoint", "prune_points=0", "profile_sentences=1", *files
    )
    assert json.loads((out / "heads.json").read_text())["decode"] == asdict(model.decoding(beam_size=1))


@pytest.mark.parametrize("engine", ["qkvmt", "ctranslate2"])
def test_serve_serves_the_checkpoints_settings(model, engine, request, tmp_path):
    """/health shows the settings the server decodes by; a request's own beam_size goes over them."""
    folder = request.getfixturevalue("exported") if engine == "ctranslate2" else None
    served, translator = (
        ([f"model_dir={folder}"], load_ctranslate2(folder)) if folder else (["ckpt_path=multi30k-de-en"], model)
    )
    argv = [sys.executable, "-m", "qkvmt", "serve", f"engine={engine}", *served, "port=0", "decode=checkpoint"]
    env = user_environment() | {"PYTHONPATH": str(ROOT / "src")}
    with server_process(argv, tmp_path, env) as (proc, line, stderr):
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, stderr()
        port = int(match.group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/health")
        health = json.loads(conn.getresponse().read())
        conn.close()
        status, text = post(port, {"sentences": SOURCES, "beam_size": 2})
    own = translator.decoding()
    assert health["decode"] == asdict(own)
    assert status == 200 and json.loads(text)["translations"] == list(translator.translate(SOURCES, own, beam_size=2))


@pytest.mark.parametrize(
    "command",
    [
        ["translate", f"sentence={SENTENCE}"],
        ["evaluate"],
        ["heads"],
        ["serve", "port=0"],
        ["explore", "port=0"],
        ["align", f"sentence={SENTENCE}"],
        ["inspect", f"sentence={SENTENCE}"],
        ["intervene", f"sentence={SENTENCE}", "edits=[{swap: {a: 0, b: 1}}]"],
        ["intervene", "study=swap"],
        ["intervene", "study=lens"],
        ["sinks"],
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("decode", ["default", "checkpoint"])
def test_a_bad_decoding_setting_is_refused_before_the_model_loads(command, decode, tmp_path):
    """A checkpoint that does not exist would be the error if the model loaded first."""
    settings = [f"ckpt_path={tmp_path / 'none.ckpt'}", f"decode={decode}", "decode.beam_size=0"]
    r = run_python("-m", "qkvmt", *command, *settings)
    assert user_error(r) == "error: decode.beam_size must be at least 1, got 0"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "setting, message",
    [
        ("decode.len_penalty=nan", "decode.len_penalty=nan: give a finite number"),
        ("decode.max_len_a=-1", "decode.max_len_a=-1, decode.max_len_b=10: the output length limit"),
        ("decode.max_len_a=inf", "decode.max_len_a=inf, decode.max_len_b=10: the output length limit"),
        ("decode.max_len_b=-1", "decode.max_len_a=1.5, decode.max_len_b=-1: the output length limit"),
        ("decode.max_tokens=0", "decode.max_tokens must be at least 1, got 0"),
    ],
)
def test_a_decoding_value_that_would_translate_otherwise_is_refused(setting, message, tmp_path):
    """NaN, a negative limit or batch: each was decoded by, the text silently other or cut short."""
    r = run_python("-m", "qkvmt", "translate", f"ckpt_path={tmp_path / 'none.ckpt'}", "decode=default", setting)
    assert user_error(r).startswith(f"error: {message}")
    assert list(tmp_path.iterdir()) == []


def test_a_huge_length_factor_is_the_models_own_limit(model):
    """1e99 tokens per source token was cast to a negative limit: every translation came out empty."""
    r = qkvmt_command("translate", "ckpt_path=multi30k-de-en", f"sentence={SENTENCE}", "decode.max_len_a=1e99")
    assert r.stdout.splitlines() == list(model.translate([SENTENCE], model.decoding(max_len_a=1000)))


def test_ctranslate2_refuses_our_engines_compute_type(exported):
    """CTranslate2 computes in its own compute_type=: decode.compute_type would be ignored."""
    r = run_python(
        "-m",
        "qkvmt",
        "translate",
        "engine=ctranslate2",
        f"model_dir={exported}",
        "sentence=x",
        "decode.compute_type=int8",
    )
    assert user_error(r) == (
        "error: decode.compute_type=int8 is for engine=qkvmt; engine=ctranslate2 computes in compute_type= "
        "(the type the folder was exported with, or int8, bfloat16, ...): give compute_type=int8"
    )
