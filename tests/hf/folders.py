"""Hugging Face model folders made in the tests: transformers' own models, built from small configs with
every parameter random (LayerNorms not at 1 and 0, so a misplaced norm shows), saved as a hub folder."""

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from qkvmt.hf.tokenizer_files import TOKENIZER_FILES
from qkvmt.loading import load_checkpoint
from qkvmt.model.checkpoint import model_weights
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer

SMALL = dict(
    d_model=16,
    encoder_layers=2,
    decoder_layers=3,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=24,
    decoder_ffn_dim=24,
    max_position_embeddings=64,
    dropout=0.1,  # eval mode turns it off in both models
)


def randomized(model, seed: int = 0, eos_bias: float = 0.0, steer: float = 1.0):
    """`model` with every parameter random, in eval mode: N(0, 0.3²), LayerNorm weights N(1, 0.3²) (so no
    norm is at 1 and 0, and the network still depends on its input); not Marian's position tables, which
    it keeps as frozen parameters and rebuilds when it loads. Marian's final_logits_bias is random too;
    `eos_bias` is added to the logit of </s>, so outputs end at several lengths, not only at the length limit.
    `steer` scales the token embeddings up and the decoder's last LayerNorm down as much (the logits as spread):
    the tokens a search chose, not only their positions, then steer the next step, so beam search can differ
    from greedy."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:
                std = 0.05 if name.endswith("bias") else 0.1 if "embed_tokens" in name or "shared" in name else 0.3
                torch.nn.init.normal_(p, mean=1.0 if "norm.weight" in name else 0.0, std=std)
            if any(table in name for table in ("embed_tokens", "shared", "lm_head")):
                p.mul_(steer)
        decoder = model.get_decoder()
        last_norm = getattr(decoder, "layer_norm", None) or decoder.layers[-1].final_layer_norm  # M2M100's or Marian's
        last_norm.weight.div_(steer)
        last_norm.bias.div_(steer)
        eos = model.config.eos_token_id
        if hasattr(model, "final_logits_bias"):
            torch.nn.init.normal_(model.final_logits_bias, std=0.05)
            model.final_logits_bias[0, eos] += eos_bias
        else:  # M2M100 has no output bias: its decoder's last LayerNorm moves along the </s> row instead
            row = model.get_output_embeddings().weight[eos]
            last_norm.bias += eos_bias * row / row.dot(row)
    return model.eval()


def saved(model, folder: Path, **generation) -> Path:
    """`model` saved into `folder` with these generation settings (generation_config.json)."""
    for key, value in generation.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(str(folder))
    return folder


def with_tokenizer(folder: Path) -> Path:
    """`folder` with a tokenizer.json of one token per row where it has no tokenizer files: a folder is opened
    whole, and these tests compare weights, not text."""
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        config = json.loads((folder / "config.json").read_text())
        rows = min(config["vocab_size"], config.get("decoder_vocab_size") or config["vocab_size"])
        vocab = {f"t{i}": i for i in range(rows)}
        Tokenizer(WordLevel(vocab, unk_token="t0")).save(str(folder / "tokenizer.json"))
    return folder


def ours(folder: Path) -> tuple[Transformer, dict]:
    """The folder imported into qkvmt's Transformer (eval mode), and its stored decoding settings."""
    ckpt = load_checkpoint(with_tokenizer(folder))
    model = Transformer(ModelConfig.from_dict(ckpt["qkvmt"]["model_config"]))
    model.load_state_dict(model_weights(ckpt))
    return model.eval(), ckpt["qkvmt"]["decode"]
