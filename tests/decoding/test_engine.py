"""Which engine a search runs on (qkvmt.decoding.engine), what its result says of it, and decode.compile's
refusals as a user meets them."""

import pytest
import torch
from hydra.utils import instantiate

import qkvmt
from qkvmt.decoding import compiled as compiled_step
from qkvmt.decoding import engine as engines
from qkvmt.decoding.engine import engine_for, generate
from qkvmt.decoding.rows import rows_kept
from qkvmt.decoding.search import DecodeConfig
from tests.commandline import run_script, start_python, user_error
from tests.conftest import compose_inference
from tests.decoding.test_compiled import nontrivial_model
from tests.decoding.test_search import padded_batch

SOURCES = ["w1 w2 w3 w4", "w7 w3 w9 w12 w5 w6"]
DEFAULT = instantiate(compose_inference("translate").decode)  # decode=default, as the commands start from
CPU = torch.device("cpu")


@pytest.fixture
def aot_eager(monkeypatch):
    """The compiled step traced as TorchInductor's is, without its code generation (test_compiled runs that)."""
    monkeypatch.setattr(compiled_step, "options", lambda device: {"dynamic": True, "backend": "aot_eager"})


def test_each_setting_chooses_its_engine_and_says_why(monkeypatch):
    model = nontrivial_model()
    choose = lambda sentences=1, **given: engine_for(model, CPU, DecodeConfig(**given), sentences)  # noqa: E731
    assert str(choose(compile="false")) == "eager (decode.compile=false)"
    assert not choose().compiled and str(engines.AUTO_SENTENCES) in choose().why.replace(",", "")
    assert choose(engines.AUTO_SENTENCES).compiled and choose(compile="true").compiled
    assert not choose(compile="auto", use_cache=False).compiled
    assert "int8" in choose(engines.AUTO_SENTENCES, compute_type="int8").why
    with rows_kept():
        assert "hook or edit" in choose(compile="true").why
    handle = model.decoder_layers[1].cross_attn.sites["v"].register_forward_hook(lambda *a: None)
    try:
        assert "hook or edit" in choose(compile="true").why
    finally:
        handle.remove()
    monkeypatch.setattr(compiled_step, "unavailable", lambda device: "no compiler here")
    monkeypatch.setattr(engines, "unavailable", compiled_step.unavailable)
    assert choose(engines.AUTO_SENTENCES).why == "no compiled step: no compiler here"


def test_translations_say_which_engine_ran_and_a_hook_falls_back_to_the_eager_one(folder, aot_eager):
    model = qkvmt.load(folder)
    eager = model.translate(SOURCES, compile="false")
    assert eager.engine == "eager (decode.compile=false)"
    fast = model.translate(SOURCES, compile="true")
    assert fast.engine.startswith("compiled") and list(fast) == list(eager)
    seen = []
    hooked = model.translate(SOURCES, compile="true", hooks={"decoder.0.ffn.out": lambda a, ctx: seen.append(1)})
    assert hooked.engine.startswith("eager") and "hook" in hooked.engine and seen  # the hook ran, eagerly
    assert list(hooked) == list(eager)


@pytest.mark.parametrize(
    "given,said",
    [
        (["decode.compile=maybe"], "error: decode.compile='maybe': use auto, true or false"),
        (
            ["decode.compile=true", "decode.use_cache=false"],
            "error: decode.compile=true and decode.use_cache=false: the compiled step runs over the KV cache; "
            "set one of them otherwise",
        ),
        (
            ["decode.compile=true", "decode.compute_type=int8"],
            "error: decode.compile=true and decode.compute_type=int8: the compiled step computes in float32 or "
            "bfloat16, and int8 runs on the eager one; set decode.compile=auto or false",
        ),
    ],
)
def test_settings_the_compiled_step_cannot_take_are_one_line(folder, given, said):
    assert user_error(run_script("translate", f"ckpt_path={folder}", *given, "sentence=w1 w2")) == said


def test_compile_true_without_a_compiler_is_one_line_and_auto_decodes_eagerly(folder, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    line = user_error(run_script("translate", f"ckpt_path={folder}", "decode.compile=true", "sentence=w1 w2"))
    assert line == (
        "error: decode.compile=true: CXX=/nonexistent/c++: no such C++ compiler (TorchInductor compiles the step "
        "with it); use decode.compile=auto or false"
    )
    r = run_script("translate", f"ckpt_path={folder}", "decode.compile=auto", "sentence=w1 w2")
    assert r.returncode == 0 and "decodes eagerly: no compiled step: CXX=/nonexistent/c++" in r.stderr
    assert r.stdout.strip() == qkvmt.load(folder).translate("w1 w2", DEFAULT, compile="false")[0]


# A tiny model's greedy search on the compiled step, its tokens printed: run twice over one compile cache.
SEARCH = """
import torch
from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from tests.decoding.test_compiled import nontrivial_model
from tests.decoding.test_search import padded_batch
from tests.decoding.test_search import padded_batch
model = nontrivial_model()
src, _ = padded_batch([5, 3], model.cfg.vocab_size)
print([h.tokens for h in generate(model, src, DecodeConfig(beam_size=1, compile="{compile}"))])
"""


def test_a_corrupted_compile_cache_is_rebuilt(tmp_path):
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    first = start_python("-c", SEARCH.format(compile="true"), env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert files  # TorchInductor kept what it compiled
    for path in files:
        path.write_bytes(b"\x00garbage" * 7)
    again = start_python("-c", SEARCH.format(compile="true"), env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    eager = start_python("-c", SEARCH.format(compile="false"), env=env)
    assert again.stdout == first.stdout == eager.stdout


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="no native bfloat16 here")
def test_the_compiled_step_computes_in_bfloat16_where_asked(aot_eager):
    """Under bf16 autocast the graph's products are autocast's, as the eager step's, not float32's."""
    model = nontrivial_model()
    src, _ = padded_batch([4, 7, 3], model.cfg.vocab_size)
    found = {
        (c, t): generate(model, src, DecodeConfig(beam_size=3, compile=c, compute_type=t))
        for c in ("false", "true")
        for t in ("float32", "bfloat16")
    }
    for t in ("float32", "bfloat16"):
        assert [h.score for h in found["true", t]] == pytest.approx([h.score for h in found["false", t]], abs=1e-5)
    assert [h.score for h in found["true", "bfloat16"]] != pytest.approx([h.score for h in found["true", "float32"]])
