"""The Hugging Face (Marian) export against our own model."""

import pytest
import torch

from qkvmt.decoding.lines import translate_ids
from qkvmt.decoding.search import DecodeConfig
from qkvmt.decoding.stepper import max_lengths
from qkvmt.errors import UserError
from qkvmt.export.hf_weights import residual_permutation
from qkvmt.export.to_huggingface import check_exportable, export_huggingface
from qkvmt.loading import load_model
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.inputs import build_inputs
from qkvmt.model.positions import sinusoidal_positions
from qkvmt.model.transformer import Transformer
from qkvmt.pipeline.export import export
from qkvmt.text.tokenizer import encode, train_bpe
from tests.conftest import compose_inference
from tests.model.test_ablations import SINGLE_ABLATIONS

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

LINES = ["w1 w2 w3", "w7  w8 w9 w10 w11 w12", "w4", "w5 w6 w0 w3"]


def test_marian_position_table_is_ours_with_the_residual_coordinates_renamed():
    # The export rests on this identity: Marian rebuilds its own table when it loads.
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    marian = MarianSinusoidalPositionalEmbedding(40, 12)
    assert torch.allclose(marian.create_weight(), sinusoidal_positions(40, 12)[:, residual_permutation(12)], atol=1e-6)


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_random_model_gives_our_logits_and_attention_after_a_save_and_an_offline_load(tmp_path, tied):
    torch.manual_seed(0)
    texts = ["a b c d", "b a", "c c d a b a", "d c b a"]
    tok = train_bpe(texts, vocab_size=20, min_frequency=1)
    model = Transformer(
        ModelConfig(
            vocab_size=tok.get_vocab_size(),
            d_model=16,
            n_heads=2,
            encoder_layers=2,
            decoder_layers=3,
            ffn_dim=24,
            max_positions=32,
            tie_embeddings=tied,  # untied: Marian's separate encoder, decoder and output matrices
        )
    ).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.3)
    export_huggingface(
        model, tok, CheckpointMeta(model_config={}, tokenizer="", src_lang="de", tgt_lang="en"), tmp_path
    )
    # eager attention returns weights: what bertviz shows (README)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        tmp_path, local_files_only=True, attn_implementation="eager"
    ).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    inp = build_inputs(encode(tok, texts[:2]), encode(tok, texts[2:]), model.cfg.specials)
    assert hf_tok(texts[:2], padding=True, return_tensors="pt").input_ids.tolist() == inp.src.tolist()
    with torch.no_grad():
        ours, attention = model(inp.src, inp.tgt_in, need_weights=True)
        out = hf(input_ids=inp.src, attention_mask=inp.src != 0, decoder_input_ids=inp.tgt_in, output_attentions=True)
    real = inp.tgt_out != 0
    assert torch.allclose(ours[real], out.logits[real], atol=1e-4)
    # the same weights in every layer and head: the renaming leaves heads alone
    q_src, q_tgt, k_src = (inp.src != 0)[:, None, :, None], real[:, None, :, None], (inp.src != 0)[:, None, None, :]
    for a, b in zip(attention.encoder, out.encoder_attentions):
        assert torch.allclose((a * q_src * k_src), (b * q_src * k_src), atol=1e-5)
    for a, b in zip(attention.cross, out.cross_attentions):
        assert torch.allclose(a * q_tgt, b * q_tgt, atol=1e-5)
    for a, b in zip(attention.decoder, out.decoder_attentions):
        assert torch.allclose(a * q_tgt, b * q_tgt, atol=1e-5)


def test_trained_model_greedy_generate_equals_ours(trained_run, tmp_path):
    generates_like_ours(trained_run["run"] / "checkpoints" / "last.ckpt", tmp_path / "hf")


def test_each_vocabulary_goes_as_a_marian_tokenizer_and_generates_like_ours(vocabulary_run, tmp_path):
    generates_like_ours(vocabulary_run["run"] / "checkpoints" / "last.ckpt", tmp_path / "hf")


def generates_like_ours(ckpt, out):
    export(compose_inference("export", f"ckpt_path={ckpt}", "format=huggingface", f"output_dir={out}"))
    model, tok, _ = load_model(ckpt)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(out, local_files_only=True).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    cfg = DecodeConfig(beam_size=1)
    ours = translate_ids(model, tok, LINES, cfg)
    enc = hf_tok(LINES, padding=True, return_tensors="pt")
    assert (
        enc.input_ids.tolist() == build_inputs(encode(tok, LINES), encode(tok, LINES), model.cfg.specials).src.tolist()
    )
    with torch.no_grad():
        generated = hf.generate(**enc, num_beams=1, do_sample=False, max_new_tokens=max(map(len, ours)) + 1).tolist()
    # The same greedy path; where ours stops at its length limit (qkvmt.decoding.search), generate goes on
    limits = max_lengths(torch.tensor([len(x) + 1 for x in encode(tok, LINES)]), cfg, model.cfg.max_positions)
    for row, mine, limit in zip(generated, ours, limits):
        ended = len(mine) + 1 < limit
        assert row[1 : len(mine) + 1 + ended] == mine + [model.cfg.eos_id] * ended
    assert hf_tok.batch_decode(ours, skip_special_tokens=True) == tok.decode_batch(ours, skip_special_tokens=True)


def test_pre_ln_rotary_and_fairseq_table_models_are_refused_with_the_format_that_takes_them():
    for kw in ({"norm_first": True}, {"positions": "rotary"}, {"sinusoidal_layout": "fairseq"}):
        with pytest.raises(UserError, match="format=ctranslate2") as e:
            check_exportable(Transformer(ModelConfig(vocab_size=10, d_model=8, n_heads=2, **kw)))
        setting, value = next(iter(kw.items()))
        assert f"model.{setting}={str(value).lower()}" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("ablation", SINGLE_ABLATIONS)
def test_attention_ablations_are_refused_naming_the_setting(ablation):
    with pytest.raises(UserError, match="format=huggingface: Marian's attention has W_Q, W_K, W_V and W_O") as e:
        check_exportable(Transformer(ModelConfig(vocab_size=10, d_model=8, n_heads=2, **ablation)))
    setting, value = next(iter(ablation.items()))
    assert f"model.{setting}={str(value).lower()}" in str(e.value) and "\n" not in str(e.value)
