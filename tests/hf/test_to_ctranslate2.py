"""A Hugging Face model opened in qkvmt, exported to CTranslate2 (qkvmt export format=ctranslate2): the
folder scores target tokens as qkvmt's forced pass does, and translates as qkvmt's search (with
CTranslate2's stopping rule, early_stopping), through its own tokenizer files."""

import json
from dataclasses import replace

import pytest
import torch
from hydra.utils import instantiate

import qkvmt
from qkvmt.errors import UserError
from qkvmt.export.ctranslate2_engine import load_ctranslate2
from qkvmt.model.inputs import build_inputs
from qkvmt.pipeline.export import export
from qkvmt.text.tokenizer import encode, encode_target, target_side
from tests.commandline import run_script
from tests.conftest import compose_inference
from tests.hf.test_tokenizers import TEXTS, whole_marian_folder

ctranslate2 = pytest.importorskip("ctranslate2", reason="the [deploy] extra (ctranslate2) is not installed")


@pytest.mark.parametrize("separate", [False, True], ids=["one vocabulary", "separate vocabularies"])
def test_an_opened_marian_model_exports_to_ctranslate2_and_scores_and_translates_as_qkvmt(tmp_path, separate):
    folder, _, _ = whole_marian_folder(tmp_path / "opus-mt-de-en", separate)
    out = tmp_path / "ct2"
    export(compose_inference("export", f"ckpt_path={folder}", "format=ctranslate2", f"output_dir={out}"))
    ours, engine = qkvmt.load(folder, device="cpu"), load_ctranslate2(out)
    tok, m = ours.tokenizer, ours.transformer
    sources, targets = encode(tok, TEXTS), encode_target(tok, TEXTS)
    name, target_name = tok.id_to_token, target_side(tok).id_to_token
    scored = engine.translator.score_batch(
        [[name(i) for i in s] for s in sources], [[target_name(i) for i in t] for t in targets]
    )
    x = build_inputs(sources, targets, m.cfg.specials)
    with torch.no_grad():
        log_probs = m(x.src, x.tgt_in)[0].log_softmax(-1).gather(-1, x.tgt_out[..., None])[..., 0]
    for row, result, target in zip(log_probs, scored, targets):
        torch.testing.assert_close(torch.tensor(result.log_probs), row[: len(target) + 1], atol=1e-4, rtol=0)
    # CTranslate2's own stopping rule; min_len, as the random model would end every sentence at once
    settings = replace(ours.decoding(), early_stopping=True, beam_size=4, min_len=4)
    translated = list(engine.translate(TEXTS, settings))
    assert translated == list(ours.translate(TEXTS, settings=settings)) and all(translated)


def test_early_stopping_false_is_refused_in_one_line_not_ignored(tmp_path):
    """transformers' early_stopping=false (the default of a Marian folder's generation settings) goes on past
    beam_size finished hypotheses; CTranslate2 cannot, so the engine says so rather than stop early."""
    folder, _, _ = whole_marian_folder(tmp_path / "opus-mt-de-en")
    out = tmp_path / "ct2"
    export(compose_inference("export", f"ckpt_path={folder}", "format=ctranslate2", f"output_dir={out}"))
    engine = load_ctranslate2(out)
    with pytest.raises(UserError, match=r"decode.early_stopping=false: CTranslate2 stops"):
        engine.translate(TEXTS, beam_size=4, early_stopping=False)
    r = run_script(
        "translate", "engine=ctranslate2", f"model_dir={out}", "decode.early_stopping=false", "sentence=Hallo"
    )
    assert r.returncode == 2 and r.stderr.splitlines() == [r.stderr.strip()] and "early_stopping=false" in r.stderr
    assert list(engine.translate(TEXTS, beam_size=1, early_stopping=False))  # greedy has no stopping rule to differ


def many_to_many_folder(kind: str, folder):
    """An M2M100 folder (fairseq's made-up words among its tokens), or an NLLB one whose model has two rows
    past its tokenizer's tokens, as NLLB-200's has; texts they tokenize."""
    from tests.hf import test_languages
    from tests.hf.folders import SMALL, randomized, saved

    if kind == "m2m100":
        test_languages.m2m100_folder(folder)
        return test_languages.TEXTS
    tok = test_languages.nllb_folder(folder)
    transformers = pytest.importorskip("transformers")
    config = transformers.M2M100Config(vocab_size=len(tok) + 2, activation_function="relu", **SMALL)
    hf = randomized(transformers.M2M100ForConditionalGeneration(config))
    saved(hf, folder, bad_words_ids=[[1]], forced_eos_token_id=2, max_length=12)
    return test_languages.TEXTS


@pytest.mark.parametrize("kind", ["m2m100", "nllb"])
def test_translate_with_an_exported_many_to_many_model_forces_its_target_language(tmp_path, kind):
    """qkvmt translate engine=ctranslate2 of an M2M100 or NLLB export, its vocabulary padded to the model's rows
    as CTranslate2's converter pads it, translates as qkvmt does with the folder: the target language first."""
    folder = tmp_path / kind
    texts = many_to_many_folder(kind, folder)
    out = tmp_path / "ct2"
    export(compose_inference("export", f"ckpt_path={folder}", "format=ctranslate2", f"output_dir={out}"))
    greedy = "decode.beam_size=1"  # a beam that reaches the length limit may rank otherwise (README, "Deploying")
    r = run_script("translate", "engine=ctranslate2", f"model_dir={out}", greedy, stdin="\n".join(texts).encode())
    assert r.returncode == 0, r.stderr
    model = qkvmt.load(folder, device="cpu")
    settings = instantiate(compose_inference("translate", f"ckpt_path={folder}", greedy).decode)
    expected = model.translate(texts, settings=settings)
    assert {row[0] for row in expected.ids} == {model.tokenizer.language_id(model.meta.tgt_lang)}
    assert r.stdout.splitlines() == list(expected) and all(expected)


@pytest.mark.parametrize("beam_size", [1, 5])
def test_an_export_of_a_folder_without_forced_eos_ends_outputs_at_the_limit_as_qkvmt(tmp_path, beam_size):
    """A many-to-many folder without forced_eos_token_id, as hub M2M100/NLLB folders ship: at the length limit
    an output ends on the last token chosen (decode.cut_at_limit, decode=checkpoint), one token longer than
    with </s> forced there; qkvmt translate engine=ctranslate2 does the same as qkvmt."""
    folder = tmp_path / "m2m100"
    texts = many_to_many_folder("m2m100", folder)
    settings = folder / "generation_config.json"
    gen = json.loads(settings.read_text())
    del gen["forced_eos_token_id"]
    settings.write_text(json.dumps(gen | {"max_length": 6, "num_beams": beam_size, "early_stopping": True}))
    out = tmp_path / "ct2"
    export(compose_inference("export", f"ckpt_path={folder}", "format=ctranslate2", f"output_dir={out}"))
    r = run_script(
        "translate", "engine=ctranslate2", f"model_dir={out}", "decode=checkpoint", stdin="\n".join(texts).encode()
    )
    assert r.returncode == 0, r.stderr
    model = qkvmt.load(folder, device="cpu")
    expected = model.translate(texts)
    assert model.decoding().cut_at_limit and any(len(row) == 5 for row in expected.ids)  # some at the limit
    forced = model.translate(texts, cut_at_limit=False, free_eos_at_limit=True)
    assert list(forced) != list(expected)  # the setting tells the two apart here
    assert r.stdout.splitlines() == list(expected)


@pytest.mark.parametrize("setting", ["renormalize"])
def test_generates_settings_that_ctranslate2_lacks_are_refused_in_one_line(tmp_path, setting):
    folder, _, _ = whole_marian_folder(tmp_path / "opus-mt-de-en")
    out = tmp_path / "ct2"
    export(compose_inference("export", f"ckpt_path={folder}", "format=ctranslate2", f"output_dir={out}"))
    with pytest.raises(UserError, match=rf"decode.{setting}=true .* is not a setting CTranslate2 has"):
        load_ctranslate2(out).translate(TEXTS, early_stopping=True, free_eos_at_limit=False, **{setting: True})
