"""The model's configuration: one typed dataclass, stored as a plain dict inside every checkpoint."""

from dataclasses import asdict, dataclass, fields

from qkvmt.errors import UserError
from qkvmt.model.positions import POSITIONS, SINUSOIDAL_LAYOUTS
from qkvmt.text.tokenizer import Specials

# The feed-forward block's nonlinearity, by the names ModelConfig.activation takes (swish and silu are one function).
ACTIVATIONS = ("relu", "gelu", "swish", "silu")

# The attention's ablation settings at their defaults: W_Q, W_K, W_V and W_O each of its own, as in the paper.
ATTENTION_DEFAULTS = {
    "query_projection": True,
    "key_projection": True,
    "value_projection": True,
    "shared_query_key": False,
    "shared_key_value": False,
    "output_projection": True,
}


@dataclass
class ModelConfig:
    vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    ffn_dim: int = 2048
    dropout: float = 0.1  # on residual branches and embeddings
    attention_dropout: float = 0.0  # on attention weights
    activation_dropout: float = 0.0  # inside the feed-forward block
    norm_first: bool = False  # False: post-LN as in Vaswani et al.; True: pre-LN
    tie_embeddings: bool = True  # one joint vocabulary: source, target and output share weights
    max_positions: int = 256  # longest sequence, special tokens included
    positions: str = "sinusoidal"  # or "rotary" (qkvmt.model.positions); checkpoints without it are sinusoidal
    # Attention ablations (qkvmt.model.attention); the defaults are the paper's, and checkpoints without them:
    query_projection: bool = True  # False: no W_Q, each head's queries are its slice of the query input
    key_projection: bool = True  # False: no W_K, each head's keys are its slice of the key input
    value_projection: bool = True  # False: no W_V, each head's values are its slice of the key input
    shared_query_key: bool = False  # True: one projection, W_K, gives both the queries and the keys
    shared_key_value: bool = False  # True: one projection, W_K, gives both the keys and the values
    output_projection: bool = True  # False: no W_O, the heads' outputs side by side are the attention's output
    # What a model imported from another toolkit (qkvmt.hf) differs in; the defaults are qkvmt's own, so every
    # checkpoint without them builds as before:
    activation: str = "relu"  # the feed-forward nonlinearity: relu, gelu (exact, erf) or swish (= silu)
    scale_embeddings: bool = True  # token embeddings × √d_model (Vaswani et al.); False: × 1
    sinusoidal_layout: str = "interleaved"  # qkvmt.model.positions.SINUSOIDAL_LAYOUTS: how sines and cosines sit
    tgt_vocab_size: int | None = None  # a target vocabulary of its own (Marian's decoder_vocab_size); None: shared
    tie_output: bool | None = None  # the output layer is the target embedding; None: as tie_embeddings
    output_bias: bool = False  # a bias on the output logits (Marian's final_logits_bias)
    pad_id: int = 0
    bos_id: int = 1  # the token the decoder reads first (Marian: <pad>, M2M100: </s>)
    eos_id: int = 2

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in (int, "int") and (isinstance(value, bool) or not isinstance(value, int)):
                raise UserError(f"model.{f.name}={value!r}: give a whole number")
            if f.type in (bool, "bool") and not isinstance(value, bool):
                raise UserError(f"model.{f.name}={value!r}: give true or false")
        for name in ("vocab_size", "d_model", "n_heads", "encoder_layers", "decoder_layers", "ffn_dim"):
            if getattr(self, name) < 1:
                raise UserError(f"model.{name}={getattr(self, name)}: give a positive whole number")
        if self.max_positions < 2:
            raise UserError(
                f"model.max_positions={self.max_positions}: a sequence needs at least 2 positions (a token and </s>)"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise UserError(f"model.{name}={value!r}: give a probability in [0, 1)")
        if self.d_model % self.n_heads:
            raise UserError(f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}")
        if self.positions not in POSITIONS:
            raise UserError(f"model.positions={self.positions!r}: use one of {', '.join(POSITIONS)}")
        if self.positions == "rotary" and (self.d_model // self.n_heads) % 2:
            raise UserError(
                f"model.positions=rotary turns pairs of dimensions, but each head has an odd number: "
                f"model.d_model={self.d_model} / model.n_heads={self.n_heads} = {self.d_model // self.n_heads}"
            )
        if self.activation not in ACTIVATIONS:
            raise UserError(f"model.activation={self.activation!r}: use one of {', '.join(ACTIVATIONS)}")
        if self.sinusoidal_layout not in SINUSOIDAL_LAYOUTS:
            raise UserError(
                f"model.sinusoidal_layout={self.sinusoidal_layout!r}: use one of {', '.join(SINUSOIDAL_LAYOUTS)}"
            )
        if self.tgt_vocab_size is not None and (
            isinstance(self.tgt_vocab_size, bool) or not isinstance(self.tgt_vocab_size, int) or self.tgt_vocab_size < 1
        ):
            raise UserError(f"model.tgt_vocab_size={self.tgt_vocab_size!r}: give a positive whole number or null")
        if self.tie_output is not None and not isinstance(self.tie_output, bool):
            raise UserError(f"model.tie_output={self.tie_output!r}: give true, false or null")
        if self.tgt_vocab_size not in (None, self.vocab_size) and self.tie_embeddings:
            raise UserError(
                f"model.tgt_vocab_size={self.tgt_vocab_size} differs from model.vocab_size={self.vocab_size}: "
                "one shared embedding cannot hold both; set model.tie_embeddings=false"
            )
        for shared, other in (
            ("shared_query_key", "query"),
            ("shared_query_key", "key"),
            ("shared_key_value", "key"),
            ("shared_key_value", "value"),
        ):
            if getattr(self, shared) and not getattr(self, f"{other}_projection"):
                raise UserError(
                    f"model.{shared}=true shares W_K, model.{other}_projection=false leaves the {other}s no "
                    "projection: set one of the two"
                )

    @property
    def attention_sources(self) -> str:
        """The projection that makes each of Q, K and V ("q", "k", "v" for W_Q, W_K, W_V; "." for none),
        as MultiHeadAttention takes it: "qkv" for the paper's attention."""
        q = "." if not self.query_projection else "k" if self.shared_query_key else "q"
        k = "k" if self.key_projection else "."
        v = "." if not self.value_projection else "k" if self.shared_key_value else "v"
        return q + k + v

    def ablations(self) -> list[str]:
        """The attention settings that differ from the paper's, as `model.<name>=<value>` (empty if none)."""
        return [
            f"model.{name}={str(getattr(self, name)).lower()}"
            for name, default in ATTENTION_DEFAULTS.items()
            if getattr(self, name) != default
        ]

    @property
    def target_vocab_size(self) -> int:
        """The size of the target vocabulary, which the decoder reads and the output layer scores."""
        return self.tgt_vocab_size if self.tgt_vocab_size is not None else self.vocab_size

    @property
    def output_tied(self) -> bool:
        """Whether the output layer is the target embedding's matrix."""
        return self.tie_embeddings if self.tie_output is None else self.tie_output

    @property
    def banned_ids(self) -> list[int]:
        """The tokens search never generates: <pad>, and the decoder's first token, unless that is </s>
        (M2M100's decoder starts with the token that ends it)."""
        return sorted({self.pad_id, self.bos_id} - {self.eos_id})

    @property
    def specials(self) -> Specials:
        return Specials(pad=self.pad_id, bos=self.bos_id, eos=self.eos_id)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return cls(**d)
