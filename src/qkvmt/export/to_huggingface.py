"""A trained model as a Hugging Face `MarianMTModel` folder: config, safetensors weights and a
fast tokenizer, which `transformers` opens offline (and bertviz, through it).

Marian is the post-LN encoder-decoder of Vaswani et al. with sinusoidal positions, embeddings
scaled by √d and biased projections: our post-LN model, layer for layer, and a Marian model opened
in qkvmt (qkvmt.hf) goes back as it came, its activation, vocabularies, output bias and tokenizer
files with it. One thing differs for qkvmt's own models: Marian's position table puts all sines
before all cosines, ours interleaves them (columns 2i, 2i+1 = sin, cos of frequency i). Both
tables hold the same columns, so the export renames the model's d coordinates of the residual
stream with that permutation (a model with Marian's own table, `sinusoidal_layout=halves`, needs
none):

    Marian column j  =  our column PERM[j],   PERM = [0, 2, 4, ..., 1, 3, 5, ...]

Every weight that reads the residual stream takes its input columns in that order, every
weight and bias that writes it (and each layer norm) its output rows. The network computes
the same function, and Marian's own position table, which it rebuilds when it loads, is then
exactly ours. Attention's heads and the feed-forward inner units are not renamed.
"""

from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, normalizers, processors

from qkvmt.errors import UserError, optional_import
from qkvmt.export.metadata import ExportMetadata
from qkvmt.hf.tokenizer_files import files_of
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import BOS, EOS, PAD, UNK


def require_transformers():
    return optional_import("transformers", "pip install transformers (or pip install -e '.[deploy]' in qkvmt's folder)")


def residual_permutation(d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """PERM: Marian's residual coordinate j is our coordinate PERM[j] (the identity for Marian's own
    table, `layout` halves)."""
    if layout == "halves":
        return torch.arange(d_model)
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under Marian's names, the residual stream's coordinates permuted."""
    c = model.cfg
    p, d = residual_permutation(c.d_model, c.sinusoidal_layout), c.d_model
    sd: dict[str, torch.Tensor] = {}

    def reads(name: str, linear: torch.nn.Linear, rows: slice = slice(None)) -> None:  # input: residual
        sd[name + ".weight"] = linear.weight[rows][:, p]
        sd[name + ".bias"] = linear.bias[rows]

    def writes(name: str, linear: torch.nn.Linear) -> None:  # output: residual
        sd[name + ".weight"] = linear.weight[p]
        sd[name + ".bias"] = linear.bias[p]

    def norm(name: str, ln: torch.nn.LayerNorm) -> None:
        sd[name + ".weight"], sd[name + ".bias"] = ln.weight[p], ln.bias[p]

    def attention(name: str, attn) -> None:
        for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
            reads(f"{name}.{proj}", attn.w_qkv, slice(i * d, (i + 1) * d))
        writes(f"{name}.out_proj", attn.w_o)

    def ffn(name: str, f) -> None:
        reads(f"{name}.fc1", f.fc1)
        writes(f"{name}.fc2", f.fc2)

    src, tgt = model.src_embed.tokens.weight[:, p], model.tgt_embed.tokens.weight[:, p]
    sd["model.encoder.embed_tokens.weight"], sd["model.decoder.embed_tokens.weight"] = src, tgt
    if c.tie_embeddings:  # Marian's one shared matrix; separate vocabularies have none
        sd["model.shared.weight"] = src
    sd["lm_head.weight"] = model.output.weight[:, p]
    bias = model.output.bias
    sd["final_logits_bias"] = torch.zeros(1, c.target_vocab_size) if bias is None else bias[None]
    positions = model.src_embed.positions[:, p]  # equal to Marian's own table
    sd["model.encoder.embed_positions.weight"] = sd["model.decoder.embed_positions.weight"] = positions
    for i, layer in enumerate(model.encoder_layers):
        name = f"model.encoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.attn_block.norm)
        ffn(name, layer.ffn)
        norm(f"{name}.final_layer_norm", layer.ffn_block.norm)
    for i, layer in enumerate(model.decoder_layers):
        name = f"model.decoder.layers.{i}"
        attention(f"{name}.self_attn", layer.self_attn)
        norm(f"{name}.self_attn_layer_norm", layer.self_block.norm)
        attention(f"{name}.encoder_attn", layer.cross_attn)
        norm(f"{name}.encoder_attn_layer_norm", layer.cross_block.norm)
        ffn(name, layer.ffn)
        norm(f"{name}.final_layer_norm", layer.ffn_block.norm)
    return {k: v.detach().float().contiguous().clone() for k, v in sd.items()}


def check_exportable(model: Transformer) -> None:
    c = model.cfg
    if c.positions != "sinusoidal":
        raise UserError(
            "format=huggingface: Marian has only sinusoidal positions, "
            f"this model has model.positions={c.positions}; use format=ctranslate2"
        )
    if c.norm_first:
        raise UserError(
            "format=huggingface: Marian is post-LN, this model is pre-LN (model.norm_first=true); "
            "use format=ctranslate2"
        )
    if c.sinusoidal_layout not in ("interleaved", "halves"):
        raise UserError(
            f"format=huggingface writes Marian, whose position table this model's (model.sinusoidal_layout="
            f"{c.sinusoidal_layout}) is not; use format=ctranslate2"
        )
    if c.d_model % 2:
        raise UserError(f"format=huggingface needs an even model.d_model for its position table, got {c.d_model}")
    if c.ablations():
        raise UserError(
            "format=huggingface: Marian's attention has W_Q, W_K, W_V and W_O of its own, this model has "
            f"{', '.join(c.ablations())}; use format=safetensors"
        )


def marian_config(c: ModelConfig):
    """The MarianConfig of our model's shape: the export's, and the benchmark's Hugging Face peer.
    It forces </s> at the length limit, as our search does; init_std is our embeddings' scale,
    for a peer that starts from random weights."""
    transformers = require_transformers()
    return transformers.MarianConfig(
        vocab_size=c.vocab_size,
        decoder_vocab_size=c.target_vocab_size,
        d_model=c.d_model,
        encoder_layers=c.encoder_layers,
        decoder_layers=c.decoder_layers,
        encoder_attention_heads=c.n_heads,
        decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.ffn_dim,
        decoder_ffn_dim=c.ffn_dim,
        activation_function=c.activation,
        max_position_embeddings=c.max_positions,
        scale_embedding=c.scale_embeddings,
        share_encoder_decoder_embeddings=c.tie_embeddings,
        tie_word_embeddings=c.output_tied,
        dropout=c.dropout,
        attention_dropout=c.attention_dropout,
        activation_dropout=c.activation_dropout,
        pad_token_id=c.pad_id,
        bos_token_id=c.bos_id,
        eos_token_id=c.eos_id,
        decoder_start_token_id=c.bos_id,
        forced_eos_token_id=c.eos_id,
        init_std=c.d_model**-0.5,
    )


def fast_tokenizer(tokenizer: Tokenizer):
    """Our tokenizer as a `PreTrainedTokenizerFast` that encodes text as qkvmt.text.tokenizer.encode
    does (whitespace runs are one space, ends stripped) and ends a source with </s>."""
    transformers = require_transformers()
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.normalizer = normalizers.Sequence(
        [normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip(), tok.normalizer]
    )
    tok.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, tok.token_to_id(EOS))])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        model_max_length=None,
    )


def export_huggingface(model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path) -> None:
    """Write the MarianMTModel folder into `out` (an empty folder)."""
    check_exportable(model)
    transformers = require_transformers()
    hf = transformers.MarianMTModel(marian_config(model.cfg))
    missing, unexpected = hf.load_state_dict(marian_state_dict(model), strict=False)
    if unexpected or [k for k in missing if not k.endswith("embed_positions.weight")]:
        raise RuntimeError(f"Marian weights do not match: missing {missing}, unexpected {unexpected}")
    gen = hf.generation_config
    gen.bad_words_ids = [[i] for i in model.cfg.banned_ids]  # as our search: never generated
    d = meta.decode
    gen.num_beams = d.get("beam_size", 1)
    # a fixed length limit (a model opened from Hugging Face, fine-tuned or not) is generate's own; qkvmt's
    # limit grows with the source, which generate cannot: then the model's positions
    fixed = d.get("max_len_a") == 0 and "max_len_b" in d
    gen.max_length = int(d["max_len_b"]) + 1 if fixed else model.cfg.max_positions  # + 1: the start token
    if d.get("min_len", 1) > 1:
        gen.min_length = d["min_len"]
    if d.get("forced_first_id") is not None:  # a many-to-many model's target language
        gen.forced_bos_token_id = d["forced_first_id"]
    if gen.num_beams > 1:  # what a beam search ranks and when it stops (generate refuses them for greedy)
        if d.get("len_penalty_style", "fairseq") == "fairseq":  # generate's own: score / length^alpha
            gen.length_penalty = d.get("len_penalty", 1.0)
        gen.early_stopping = d.get("early_stopping", True)
    transformers.utils.logging.disable_progress_bar()  # a bar for writing one small file is noise
    hf.save_pretrained(str(out))
    files = files_of(meta)  # a model opened from Hugging Face (or fine-tuned from one): its own tokenizer files
    if files is not None:
        for name, data in files.items():
            (out / name).write_bytes(data)
    else:
        fast_tokenizer(tokenizer).save_pretrained(str(out))
    ExportMetadata.of("huggingface", model.cfg, meta).write(out)


class HuggingFaceFormat:
    """format=huggingface: a MarianMTModel folder; `check` refuses what Marian cannot hold."""

    def __init__(self, cfg):
        require_transformers()

    check = staticmethod(check_exportable)

    def write(self, model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path) -> None:
        export_huggingface(model, tokenizer, meta, out)
