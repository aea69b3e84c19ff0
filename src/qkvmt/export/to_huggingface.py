"""A trained model as a Hugging Face folder: config, safetensors weights and a fast tokenizer, which
`transformers` opens offline (and bertviz, through it). A post-LN model goes as a `MarianMTModel`, a
pre-LN one as an `M2M100ForConditionalGeneration`.

Marian is the post-LN encoder-decoder of Vaswani et al. with sinusoidal positions, embeddings scaled by √d
and biased projections: our post-LN model, layer for layer (its position table's columns renamed:
qkvmt.export.hf_weights). M2M100 is the pre-LN one, each stack ending with a LayerNorm, with fairseq's
position table (`sinusoidal_layout=fairseq`) and no output bias. A Marian or M2M100 model opened in qkvmt
(qkvmt.hf) goes back as it came, its activation, vocabularies, output bias and tokenizer files with it;
qkvmt's own pre-LN models have another position table than M2M100's and are refused.
"""

from pathlib import Path

from tokenizers import Regex, Tokenizer, normalizers, processors

from qkvmt.errors import UserError, optional_import
from qkvmt.export.hf_weights import hf_state_dict
from qkvmt.export.metadata import ExportMetadata
from qkvmt.hf.families import FAMILIES, written_as
from qkvmt.hf.family import Family
from qkvmt.hf.names import ENCODER_EMBED, REBUILT, SHARED
from qkvmt.hf.tokenizer_files import files_of
from qkvmt.model.checkpoint import CheckpointMeta
from qkvmt.model.config import ModelConfig
from qkvmt.model.transformer import Transformer
from qkvmt.text.tokenizer import BOS, EOS, PAD, UNK


def require_transformers():
    return optional_import("transformers", "pip install transformers (or pip install -e '.[deploy]' in qkvmt's folder)")


def check_exportable(model: Transformer) -> None:
    c = model.cfg
    if c.positions != "sinusoidal":
        raise UserError(
            f"format=huggingface: {' and '.join(f.title for f in FAMILIES.values())} have only sinusoidal positions, "
            f"this model has model.positions={c.positions}; use format=ctranslate2"
        )
    family = written_as(c)
    stack = "a pre-LN model" if c.norm_first else "a post-LN model"
    if c.sinusoidal_layout not in family.layouts:
        what = f"{stack} (model.norm_first=true)" if c.norm_first else stack
        raise UserError(
            f"format=huggingface writes {what} as {family.title}, whose position table this model's "
            f"(model.sinusoidal_layout={c.sinusoidal_layout}) is not; use format=ctranslate2"
        )
    why = family.refuses(c)
    if why is not None:
        raise UserError(f"format=huggingface writes {stack} as {family.title}, which {why}; use format=ctranslate2")
    if c.d_model % 2:
        raise UserError(f"format=huggingface needs an even model.d_model for its position table, got {c.d_model}")
    if c.ablations():
        raise UserError(
            "format=huggingface: Marian's attention has W_Q, W_K, W_V and W_O of its own, this model has "
            f"{', '.join(c.ablations())}; use format=safetensors"
        )


def shape(c: ModelConfig) -> dict:
    """The config keys every family shares, for our model's shape. It forces </s> at the length limit,
    as our search does; init_std is our embeddings' scale, for a peer that starts from random weights."""
    return dict(
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
        tie_word_embeddings=c.output_tied,
        dropout=c.dropout,
        attention_dropout=c.attention_dropout,
        activation_dropout=c.activation_dropout,
        pad_token_id=c.pad_id,
        eos_token_id=c.eos_id,
        decoder_start_token_id=c.bos_id,
        forced_eos_token_id=c.eos_id,
        init_std=c.d_model**-0.5,
    )


def hf_config(family: Family, c: ModelConfig):
    """The transformers config of `family` for our model's shape."""
    return getattr(require_transformers(), family.config_class)(**family.config_keys(c), **shape(c))


def marian_config(c: ModelConfig):
    """The MarianConfig of our model's shape: the export's, and the benchmark's Hugging Face peer."""
    return hf_config(FAMILIES["marian"], c)


def hf_model(c: ModelConfig):
    """A Hugging Face model of our model's shape, of the family it is written as (qkvmt.hf.families)."""
    family = written_as(c)
    return getattr(require_transformers(), family.model_class)(hf_config(family, c))


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
    """Write the Marian or M2M100 folder into `out` (an empty folder)."""
    check_exportable(model)
    transformers = require_transformers()
    hf = hf_model(model.cfg)
    weights = hf_state_dict(model)
    if SHARED in hf.state_dict():  # M2M100 keeps `shared` beside untied embeddings, unused: the encoder's, as of old
        weights.setdefault(SHARED, weights[ENCODER_EMBED])
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    if unexpected or set(missing) - set(REBUILT):
        raise RuntimeError(f"{type(hf).__name__} weights do not match: missing {missing}, unexpected {unexpected}")
    gen = hf.generation_config
    gen.bad_words_ids = [[i] for i in model.cfg.banned_ids]  # as our search: never generated
    d = meta.decode
    if d.get("free_eos_at_limit"):  # </s> forced at the length limit (transformers 5 drops the config's)
        gen.forced_eos_token_id = model.cfg.eos_id
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
    """format=huggingface: a Marian or M2M100 folder; `check` refuses what neither can hold."""

    def __init__(self, cfg):
        require_transformers()

    check = staticmethod(check_exportable)

    def write(self, model: Transformer, tokenizer: Tokenizer, meta: CheckpointMeta, out: Path) -> None:
        export_huggingface(model, tokenizer, meta, out)
