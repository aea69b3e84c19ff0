"""The Python API: qkvmt.load and its model give what the commands give, as typed results that
show themselves in a notebook and save themselves."""

import html
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest

import qkvmt
from qkvmt.analysis.forced import KINDS, forced_attention, one_pass_signals
from qkvmt.decoding.lines import translate_ids
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.loading import load_model
from qkvmt.pipeline.align import align
from qkvmt.pipeline.export import export
from qkvmt.pipeline.inspect_attention import inspect_attention
from qkvmt.pipeline.translate import translate
from tests.analysis.throwaway import SLOW, throwaway_signals
from tests.conftest import ROOT, compose_inference
from tests.results.test_report import assert_not_pwned, dump_dom

SOURCE = "w1 w2 w3 w4"


@pytest.fixture(scope="module")
def ckpt(trained_run):
    return trained_run["run"] / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="module")
def model(ckpt):
    return qkvmt.load(ckpt, device="cpu")


def test_import_qkvmt_is_light_and_names_the_api():
    code = (
        "import sys, qkvmt; print('qkvmt.api' in sys.modules, 'torch' in sys.modules); print(qkvmt.load.__module__)\n"
        "try: qkvmt.load('nope.ckpt')\nexcept qkvmt.UserError: print('lightning' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    assert out == [
        "False",
        "False",
        "qkvmt.api",
        "False",
    ]  # nothing heavy until a name is used; Lightning only to place a model
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        qkvmt.lod  # noqa: B018


def test_translate_is_the_commands_translation(model, ckpt):
    lines = ["w1 w2", "", "w3 w4 w5 w6"]
    out = model.translate(lines)
    transformer, tok, meta = load_model(ckpt)
    cfg = DecodeConfig(**meta.decode)  # the checkpoint's own settings: its run's test decoding
    assert out.ids == translate_ids(transformer, tok, lines, cfg)
    assert list(out) == [tok.decode(ids) for ids in out.ids] and out[1] == ""
    assert out.sources == lines and out.settings["beam_size"] == meta.decode["beam_size"] == 2
    assert model.translate(lines[0])[0] == out[0]  # one text: a list of one
    stdout = io.StringIO()
    translate(
        compose_inference("translate", f"ckpt_path={ckpt}", "decode.beam_size=2"),
        io.BytesIO("\n".join(lines).encode() + b"\n"),
        stdout,
    )
    assert stdout.getvalue().splitlines() == list(out)


def test_decoding_keywords_override_the_checkpoints_settings(model, ckpt):
    greedy = model.translate([SOURCE], beam_size=1)
    transformer, tok, _ = load_model(ckpt)
    assert greedy.ids == translate_ids(
        transformer, tok, [SOURCE], DecodeConfig(**(model.meta.decode | {"beam_size": 1}))
    )
    assert greedy.settings["beam_size"] == 1
    with pytest.raises(UserError, match="'beam' is no decoding setting: use beam_size"):
        model.translate([SOURCE], beam=3)


def test_attention_is_a_forced_pass_over_the_models_own_translation(model, ckpt):
    att = model.attention(SOURCE)
    ids = model.translate([SOURCE]).ids[0]
    transformer, tok, _ = load_model(ckpt)
    reference = forced_attention(transformer, tok, SOURCE, ids)
    for kind in KINDS:
        np.testing.assert_array_equal(att.map(kind).weights, reference.map(kind).weights)
    assert att.target == tok.decode(ids) and not att.forced and att.source == SOURCE
    assert [m.kind for m in att.maps()] == list(KINDS)
    c = transformer.cfg
    assert att.cross.shape == (c.decoder_layers, c.n_heads, len(att.out_tokens), len(att.src_tokens))
    assert att.src_words == SOURCE.split() and len(att.src_groups) == 4
    forced = model.attention(SOURCE, "t4 t3 t2 t1")
    assert forced.forced and forced.tgt_words == ["t4", "t3", "t2", "t1"]


def test_attention_computes_the_signals_asked_for(model):
    default = model.attention(SOURCE)
    assert set(default.signals) == one_pass_signals()
    with throwaway_signals() as slow_calls:
        slow = model.attention(SOURCE, signals=[SLOW])
    assert slow.signals == ["weights", SLOW] and len(slow_calls) == 1  # the weights always, and what was named
    assert model.attention(SOURCE, signals="alti").signals == ["weights", "alti"]
    np.testing.assert_array_equal(slow.cross, default.cross)
    with pytest.raises(UserError, match="signals=alti2: no such signal; use some of weights"):
        model.attention(SOURCE, signals={"alti2"})


def test_align_and_inspect_equal_what_the_commands_write(model, ckpt, tmp_path):
    ours = model.align(SOURCE, "t4 t3 t2 t1")
    align(
        compose_inference(
            "align",
            f"ckpt_path={ckpt}",
            f"sentence='{SOURCE}'",
            "reference='t4 t3 t2 t1'",
            f"output_dir={tmp_path / 'align'}",
        )
    )
    assert ours.to_dict() == json.loads((tmp_path / "align" / "alignment.json").read_text())
    assert ours.pharaoh == " ".join(f"{i}-{j}" for i, j in ours.links)

    head = model.inspect(SOURCE, kind="decoder", layer=1, head=2)
    inspect_attention(
        compose_inference(
            "inspect_attention",
            f"ckpt_path={ckpt}",
            f"sentence='{SOURCE}'",
            "kind=decoder",
            "layer=1",
            "head=2",
            f"output_dir={tmp_path / 'inspect'}",
        )
    )
    assert head.to_dict() == json.loads((tmp_path / "inspect" / "inspect.json").read_text())
    assert head.check["output_max_abs_diff"] < 1e-5


def test_align_takes_a_policy_as_an_object_or_a_dict_and_checks_it(model):
    default = model.align(SOURCE)
    assert default.policy == model.default_policy.to_dict()
    one_head = model.align(SOURCE, policy={"layer": 0, "head": 1})
    assert one_head.policy == model.default_policy.to_dict() | {"layer": 0, "head": 1}
    cross = qkvmt.AttentionMap("cross", one_head.cross, one_head.tgt_tokens, one_head.src_tokens)
    expected = qkvmt.AlignmentPolicy(0, 1).word_matrix(cross, one_head.tgt_word_groups, one_head.src_word_groups)
    np.testing.assert_allclose(one_head.word_matrix, expected)
    with pytest.raises(UserError, match="alignment.head=7"):
        model.align(SOURCE, policy={"head": 7})
    with pytest.raises(UserError, match=r"^policy field 'heads': no such field; a policy has layer, head, rows"):
        model.align(SOURCE, policy={"heads": 1})  # a misspelt field is never ignored
    with pytest.raises(UserError, match=r"^alignment.layer='0': the decoder has"):
        model.align(SOURCE, policy={"layer": "0"})
    with pytest.raises(UserError, match="source is empty"):
        model.align("  ")


def test_results_show_their_own_page_in_a_notebook_and_save_their_files(model, tmp_path):
    results = {
        "attention": (
            model.attention(SOURCE),
            {"attention.npz", "encoder.png", "decoder.png", "cross.png", "attention.html"},
        ),
        "align": (model.align(SOURCE), {"alignment.json", "alignment.png", "alignment.html"}),
        "inspect": (model.inspect(SOURCE), {"inspect.json", "inspect.html"}),
        "translate": (model.translate([SOURCE, "w5"]), {"translations.txt", "translations.json", "translations.html"}),
    }
    for name, (result, files) in results.items():
        frame = result._repr_html_()
        assert frame.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in frame
        srcdoc = re.search(r'srcdoc="(.*?)"', frame, re.S).group(1)
        assert html.unescape(srcdoc) == result.html()  # the very page the command writes
        assert result.save(tmp_path / name) == tmp_path / name
        assert {p.name for p in (tmp_path / name).iterdir()} == files
        with pytest.raises(UserError, match="already holds files"):
            result.save(tmp_path / name)
    alignment = results["align"][0]
    assert json.loads((tmp_path / "align" / "alignment.json").read_text()) == alignment.to_dict()
    assert (tmp_path / "translate" / "translations.txt").read_text().splitlines() == list(results["translate"][0])
    alignment.save(tmp_path / "one" / "a.json")
    assert json.loads((tmp_path / "one" / "a.json").read_text())["pharaoh"] == alignment.pharaoh
    with pytest.raises(UserError, match=r"\.png is 3 files"):
        results["attention"][0].save(tmp_path / "x.png")
    saved = np.load(tmp_path / "attention" / "attention.npz")
    np.testing.assert_array_equal(saved["cross"], results["attention"][0].cross)
    assert list(saved["out_tokens"]) == results["attention"][0].out_tokens


def test_a_sentences_attention_page_draws_its_viewer_in_chromium(model, tmp_path):
    page = model.attention("w1 <img src=x onerror=alert(1)> w3").save(tmp_path / "attention.html")
    dom = dump_dom(page, tmp_path)
    assert_not_pwned(dom, "report")
    assert 'data-shown="cross 1 mean"' in dom  # the last layer's cross-attention, averaged over heads
    assert "<img src=x" not in dom


def test_load_takes_a_run_folder_and_an_exported_ctranslate2_folder(model, ckpt, trained_run, tmp_path):
    from_run = qkvmt.load(trained_run["run"], device="cpu")
    assert from_run.paths == [trained_run["run"] / "checkpoints" / "best.ckpt"]
    averaged = qkvmt.load(ckpt, average=[ckpt.parent / "step0000020.ckpt"], device="cpu")
    assert len(averaged.paths) == 2 and "average of 2 checkpoints" in repr(averaged)
    export(compose_inference("export", f"ckpt_path={ckpt}", "format=ctranslate2", f"output_dir={tmp_path / 'ct2'}"))
    ct2 = qkvmt.load(tmp_path / "ct2")
    assert isinstance(ct2, qkvmt.CTranslate2Model)
    lines = ["w1 w2", "w3 w4 w5 w6"]
    assert list(ct2.translate(lines)) == list(model.translate(lines))  # token for token, as tests/export checks
    with pytest.raises(UserError, match="only translates"):
        ct2.attention("w1 w2")
    with pytest.raises(UserError, match="checkpoint not found"):
        qkvmt.load(tmp_path / "missing.ckpt")
