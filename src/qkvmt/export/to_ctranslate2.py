"""A trained model as a CTranslate2 model folder, built with CTranslate2's own spec API.

Our layers map one to one onto `ctranslate2.specs.TransformerSpec`:

    ours                                   CTranslate2
    src/tgt tokens (× √d, tied)            encoder.embeddings[0] / decoder.embeddings (scaled)
    the sinusoidal table (any layout)      position_encodings.encodings, stored explicitly:
                                           CTranslate2's own table puts all sines before all
                                           cosines, ours interleaves them
    RotaryPositions (positions=rotary)     rotary_dim=0 (all of d_k), rotary_interleave=True
                                           (pairs 2i, 2i+1), rotary_base: on the self-attention
                                           of encoder and decoder, none on cross-attention
    self_attn.w_qkv (3D, D)                self_attention.linear[0] (fused Q, K, V)
    cross_attn.w_qkv                       attention.linear[0] = the W_Q rows, linear[1] = W_K, W_V
    w_o, fc1, fc2                          linear[-1], ffn.linear_0, ffn.linear_1
    Residual.norm (post- or pre-LN)        the sub-layer's layer_norm; pre_norm picks where it runs
    encoder_norm / decoder_norm (pre-LN)   encoder.layer_norm / decoder.layer_norm
    output (and its bias)                  decoder.projection
    activation, scale_embeddings           the layers' activation, scale_embeddings

Each side's vocabulary is registered (the joint one twice), the source gets its </s> from the
model's config (add_source_eos), and the tokenizer (tokenizer.json, or a Hugging Face model's own
files) and qkvmt.json (languages, decoding settings, model config) travel in the folder, so
`translate.py engine=ctranslate2 model_dir=...` needs nothing else.
"""

from pathlib import Path

import torch
from tokenizers import Tokenizer

from qkvmt.errors import UserError, optional_import
from qkvmt.export.metadata import TOKENIZER, ExportMetadata
from qkvmt.hf.tokenizer_files import files_of
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.positions import ROTARY_BASE
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import UNK, target_side

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16", "int8_bfloat16")


def require_ctranslate2():
    return optional_import(
        "ctranslate2", "pip install ctranslate2 (or pip install -e '.[deploy]' in qkvmt's folder)", "CTranslate2"
    )


def check_quantization(quantization: str) -> None:
    if quantization not in QUANTIZATIONS:
        raise UserError(f"quantization={quantization!r}: use one of {', '.join(QUANTIZATIONS)}")


def vocabulary(tokenizer: Tokenizer, size: int) -> list[str]:
    """The token of every id, in id order: `size` of them, as the model's embedding has rows. Rows past the
    tokenizer's tokens (NLLB's, fairseq's padding) are named as CTranslate2's own converter names them."""
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.get)
    if [vocab[t] for t in tokens] != list(range(len(tokens))):
        raise UserError("the checkpoint's tokenizer has gaps in its ids; CTranslate2 needs one token per id")
    if len(tokens) > size:
        raise UserError(f"the tokenizer has {len(tokens)} tokens but the model {size}: the checkpoint is inconsistent")
    return tokens + [f"madeupword{i}" for i in range(size - len(tokens))]


def check_exportable(model: Transformer) -> None:
    """Refuse, in one line, an attention ablation: CTranslate2's layers have every projection."""
    if model.cfg.ablations():
        raise UserError(
            "format=ctranslate2: its attention has W_Q, W_K, W_V and W_O of its own, this model has "
            f"{', '.join(model.cfg.ablations())}; use format=safetensors"
        )


def build_spec(model: Transformer, tokenizer: Tokenizer):
    """The `TransformerSpec` of `model`, its weights set, its vocabulary registered."""
    check_exportable(model)
    ct2 = require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    c = model.cfg
    activation = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH", "silu": "SWISH"}[c.activation]
    layout = dict(pre_norm=c.norm_first, activation=getattr(common_spec.Activation, activation))
    if c.positions == "rotary":
        layout.update(rotary_dim=0, rotary_interleave=True, rotary_base=ROTARY_BASE)
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(c.encoder_layers, c.n_heads, **layout),
        transformer_spec.TransformerDecoderSpec(c.decoder_layers, c.n_heads, **layout),
    )
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _np(model.src_embed.tokens.weight)
    dec.embeddings.weight = _np(model.tgt_embed.tokens.weight)
    if c.positions == "sinusoidal":  # the model's own table, whatever its layout
        enc.position_encodings.encodings = dec.position_encodings.encodings = _np(model.src_embed.positions)
    enc.scale_embeddings = dec.scale_embeddings = c.scale_embeddings
    for layer, ours in zip(enc.layer, model.encoder_layers):
        _linear(layer.self_attention.linear[0], ours.self_attn.w_qkv)
        _linear(layer.self_attention.linear[1], ours.self_attn.w_o)
        _norm(layer.self_attention.layer_norm, ours.attn_block.norm)
        _ffn(layer.ffn, ours.ffn, ours.ffn_block.norm)
    for layer, ours in zip(dec.layer, model.decoder_layers):
        _linear(layer.self_attention.linear[0], ours.self_attn.w_qkv)
        _linear(layer.self_attention.linear[1], ours.self_attn.w_o)
        _norm(layer.self_attention.layer_norm, ours.self_block.norm)
        cross, d = ours.cross_attn.w_qkv, c.d_model
        _linear(layer.attention.linear[0], cross, rows=slice(0, d))  # W_Q
        _linear(layer.attention.linear[1], cross, rows=slice(d, None))  # W_K, W_V
        _linear(layer.attention.linear[2], ours.cross_attn.w_o)
        _norm(layer.attention.layer_norm, ours.cross_block.norm)
        _ffn(layer.ffn, ours.ffn, ours.ffn_block.norm)
    if c.norm_first:
        _norm(enc.layer_norm, model.encoder_norm)
        _norm(dec.layer_norm, model.decoder_norm)
    _linear(dec.projection, model.output)  # with Marian's final_logits_bias where the model has it
    spec.register_source_vocabulary(vocabulary(tokenizer, c.vocab_size))
    target = vocabulary(target_side(tokenizer), c.target_vocab_size)
    spec.register_target_vocabulary(target)
    unk = UNK if UNK in target else "<unk>"  # qkvmt's own, or a SentencePiece vocabulary's
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = unk, target[c.bos_id], target[c.eos_id]
    spec.config.decoder_start_token = target[c.bos_id]
    spec.config.add_source_eos = True  # our source rows are x_1 .. x_n </s>
    spec.config.layer_norm_epsilon = model.decoder_layers[0].ffn_block.norm.eps
    return ct2, spec


def export_ctranslate2(
    model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path, quantization: str = "float32"
) -> None:
    """Write the CTranslate2 model folder into `out` (an empty folder)."""
    check_quantization(quantization)
    _, spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(str(out))
    files = files_of(meta)  # a model opened from Hugging Face (or fine-tuned from one): its own tokenizer files
    if files is not None:
        for name, data in files.items():
            (out / name).write_bytes(data)
    else:
        tokenizer.save(str(out / TOKENIZER))
    ExportMetadata.of("ctranslate2", model.cfg, meta, quantization=quantization).write(out)


def _np(t: torch.Tensor):
    return t.detach().float().cpu().contiguous().numpy()


def _linear(spec, linear: torch.nn.Linear, rows: slice = slice(None)) -> None:
    spec.weight = _np(linear.weight[rows])
    if linear.bias is not None:
        spec.bias = _np(linear.bias[rows])


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _np(norm.weight), _np(norm.bias)


def _ffn(spec, ffn, norm: torch.nn.LayerNorm) -> None:
    _linear(spec.linear_0, ffn.fc1)
    _linear(spec.linear_1, ffn.fc2)
    _norm(spec.layer_norm, norm)


class CTranslate2Format:
    """format=ctranslate2 (quantization=...): everything about the format is checked when it is
    made, before the checkpoint is loaded; it holds any model qkvmt trains but the attention
    ablations."""

    def __init__(self, cfg):
        require_ctranslate2()
        check_quantization(cfg.quantization)
        self.quantization = cfg.quantization

    def check(self, model: Transformer) -> None:
        """CTranslate2 holds every layout qkvmt trains (post- or pre-LN, tied or separate
        embeddings, sinusoidal or rotary positions), but no attention ablation."""
        check_exportable(model)

    def write(self, model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path) -> None:
        export_ctranslate2(model, tokenizer, meta, out, self.quantization)
