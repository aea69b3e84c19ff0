"""The hook names mean what they say on imported models: Marian (post-LN) and M2M100 (pre-LN, final LayerNorms)
folders, every parameter random, loaded with qkvmt.load and read with run_with_cache, against transformers'
own model of the same folder with output_attentions and output_hidden_states (eager attention, which returns
its weights). Two sources of different lengths, a forced target each, fed to transformers as transformers
itself would shift its labels; only real positions are compared, as the two pad differently. And a hook inside
search acts alike with the KV cache and without it."""

import sys

import pytest
import torch

import qkvmt
from qkvmt.analysis.named_pass import batch_of
from qkvmt.text.tokenizer import encode_target

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")

SOURCES = ["Ein Mann läuft über die Straße .", "die Katze"]
TARGETS = ["the cat jumps .", "a man runs over the red street ."]
NAMES = ["**.weights", "*.embed", "*.*.resid_post", "*.out", "logits"]
ATTENTIONS = {"encoder.{}.self": "encoder_attentions", "decoder.{}.self": "decoder_attentions"}
ATTENTIONS |= {"decoder.{}.cross": "cross_attentions"}


def marian(folder):
    from tests.hf.test_tokenizers import whole_marian_folder

    folder = whole_marian_folder(folder, eos_bias=0.0, steer=10.0)[0]  # outputs of many tokens, which a hook can change
    return qkvmt.load(folder, device="cpu"), transformers.MarianTokenizer.from_pretrained(str(folder)), folder


def m2m100(folder):
    from tests.hf.test_languages import m2m100_folder

    tok, _ = m2m100_folder(folder, num_beams=4)
    tok.src_lang, tok.tgt_lang = "de", "en"  # the folder's pair, which qkvmt.load takes by default
    return qkvmt.load(folder, device="cpu"), tok, folder


@pytest.fixture(scope="module", params=[marian, m2m100], ids=["marian", "m2m100"])
def imported(request, tmp_path_factory):
    """The folder loaded by qkvmt, its transformers tokenizer and model (eager attention), and both sides'
    inputs."""
    model, tok, folder = request.param(tmp_path_factory.mktemp("hf") / "folder")
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    batch = tok(SOURCES, text_target=TARGETS, padding=True, return_tensors="pt")
    pad, start = hf.config.pad_token_id, hf.config.decoder_start_token_id
    # Marian's start is its pad; M2M100's is </s>, so its decoder reads </s> __en__ y_1 .. y_m
    shift = sys.modules[type(hf).__module__].shift_tokens_right
    theirs = batch.input_ids, shift(batch.labels, pad, start), batch.labels != pad
    ours = batch_of(model.transformer, model.tokenizer, SOURCES, encode_target(model.tokenizer, TARGETS))
    return model, hf, theirs, ours


def close(ours: torch.Tensor, theirs: torch.Tensor, what: str) -> None:
    diff = (ours - theirs).abs().max().item()
    assert diff < 1e-5, f"{what}: {diff}"


def test_the_forced_pass_reads_what_transformers_reads(imported):
    """qkvmt's source ids are transformers', and so are the decoder's inputs at every position that predicts a
    label (their start token included; after it, where transformers' shift reads the shorter row's </s>, qkvmt
    reads a pad, which no real position sees)."""
    model, hf, (src, tgt_in, real), (our_src, our_tgt_in, our_tgt_out) = imported
    assert our_src.tolist() == src.tolist()
    assert our_tgt_in[real].tolist() == tgt_in[real].tolist()
    assert (our_tgt_out != model.transformer.cfg.pad_id).tolist() == real.tolist()
    assert our_tgt_in[:, 0].tolist() == [hf.config.decoder_start_token_id] * len(TARGETS)
    assert all(n > 1 for n in real.sum(-1)) and len(set(real.sum(-1).tolist())) == 2  # two target lengths


def both_passes(imported):
    """transformers' outputs, with every attention's weights and hidden states; qkvmt's Cache of the names
    compared; and which positions of each stack are real."""
    model, hf, (src, tgt_in, real_tgt), _ = imported
    real_src = src != hf.config.pad_token_id
    assert len(set(real_src.sum(-1).tolist())) == 2  # two source lengths: the pads are on one row
    seen = dict(output_attentions=True, output_hidden_states=True)
    with torch.no_grad():
        out = hf(input_ids=src, attention_mask=real_src, decoder_input_ids=tgt_in, **seen)
    return out, model.run_with_cache(SOURCES, TARGETS, names=NAMES), {"encoder": real_src, "decoder": real_tgt}


def test_attention_weights_match_transformers(imported):
    out, cache, real = both_passes(imported)
    keys = {"encoder.{}.self": real["encoder"], "decoder.{}.self": real["decoder"], "decoder.{}.cross": real["encoder"]}
    for b in range(len(SOURCES)):
        for part, field in ATTENTIONS.items():
            q, k = real[part.split(".")[0]][b], keys[part][b]
            for i, theirs in enumerate(getattr(out, field)):
                name = f"{part.format(i)}.weights"
                close(cache[name][b][:, q][:, :, k], theirs[b][:, q][:, :, k], name)


def test_the_residual_stream_and_logits_match_transformers(imported):
    """transformers' hidden states are the stream entering each layer, and last the stack's output: after
    M2M100's final LayerNorm (encoder.out, decoder.out), which Marian, post-LN, has not (there it is the last
    layer's resid_post too)."""
    out, cache, real = both_passes(imported)
    post_ln = not imported[0].transformer.cfg.norm_first
    for b in range(len(SOURCES)):
        for stack, states in (("encoder", out.encoder_hidden_states), ("decoder", out.decoder_hidden_states)):
            r, last = real[stack][b], len(states) - 2
            names = [f"{stack}.embed", *(f"{stack}.{i}.resid_post" for i in range(last)), f"{stack}.out"]
            names += [f"{stack}.{last}.resid_post"] if post_ln else []
            for name, theirs in zip(names, [*states, states[-1]] if post_ln else states, strict=True):
                close(cache[name][b][r], theirs[b][r], name)
        close(cache["logits"][b][real["decoder"][b]], out.logits[b][real["decoder"][b]], "logits")


def test_a_hook_inside_search_acts_alike_with_and_without_the_cache(imported):
    """A hook on decoder.0.cross.v that changes one source key's values: the search's outputs with the KV
    cache (the keys and values computed once) and without it (every step runs the whole prefix) agree, and
    differ from the unhooked outputs (the hook acts)."""
    model = imported[0]

    def louder(v, ctx):
        v = v.clone()
        v[:, :, 1] *= -8  # a key every source has
        return v

    hooks = {"decoder.0.cross.v": louder}
    cached = model.translate(SOURCES, hooks=hooks, use_cache=True)
    assert cached.ids == model.translate(SOURCES, hooks=hooks, use_cache=False).ids
    assert cached.ids != model.translate(SOURCES).ids
