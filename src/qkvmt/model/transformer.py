"""The encoder-decoder Transformer of Vaswani et al. (2017), built from qkvmt's own attention.

Attention weights are returned, never stored: `encode(..., need_weights=True)` and
`decode(..., need_weights=True)` give one (B, H, T_q, T_k) tensor per layer. A `WeightRequest`
names the layers of each kind instead: only those run the explicit attention path
(an alignment loss on one cross-attention layer leaves every other layer on the fast kernel),
and the lists hold None for the layers not asked for.
"""

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from qkvmt.model.config import ModelConfig
from qkvmt.model.kv_cache import KVCache
from qkvmt.model.layers import DecoderLayer, EncoderLayer
from qkvmt.model.linear import Linear
from qkvmt.model.positions import RotaryPositions, sinusoidal_positions
from qkvmt.model.sites import sites


@dataclass
class DecoderState:
    """Incremental decoding state: one (self, cross) KV cache pair per decoder layer."""

    caches: list[tuple[KVCache, KVCache]]
    steps: int = 0  # target positions already decoded: the self-attention caches' slots
    # (N,) the slot each row's history starts at, where rows began at different steps (sentences that joined
    # a search in progress, qkvmt.decoding.running); None: every row at slot 0
    start: Tensor | None = None

    def reorder_beams(self, index: Tensor) -> None:
        """Row i takes row index[i]'s decoder self-attention history.

        Beam search only moves a row within its own sentence's beams, and those share one
        source, so the cross-attention caches (the same for every beam of a sentence) stay put.
        """
        if self.start is not None:
            self.start = self.start.index_select(0, index)
        caches = [self_cache for self_cache, _ in self.caches]
        if caches[0].k is None:
            return
        if index.numel() == caches[0].k.size(0):  # same rows: copy only those that move
            moved = (index != torch.arange(index.numel(), device=index.device)).nonzero()[:, 0]
            if 2 * moved.numel() < index.numel():
                src = index[moved]
                for cache in caches:
                    cache.copy_rows(moved, src)
                return
        for cache in caches:
            cache.reorder(index)

    def keep_sentences(self, index: Tensor) -> None:
        """Only sentences `index` go on: the cross-attention caches (one row a sentence) keep
        their rows; the self-attention rows follow with reorder_beams."""
        for _, cross in self.caches:
            cross.reorder(index)

    def add_rows(
        self,
        rows: int,
        memory_kv: list[tuple[Tensor, Tensor]],
        device,
        keep: tuple[Tensor, Tensor] | None = None,
    ) -> None:
        """`rows` rows with no history yet join after the others (their decoding starts at the next
        step), of the sentences whose cross-attention keys and values per layer are `memory_kv`
        ((B', H, S', d_k) each, rows / B' beams a sentence): each cache's rows are padded to the
        longer of the two lengths, which the masks leave out (decode's own for the slots before a
        row's start, the source mask for the memory's). keep: (rows, sentences) of those here that
        stay, in the same copy."""
        keep_rows, keep_sentences = keep if keep is not None else (None, None)
        start = torch.full((rows,), self.steps, dtype=torch.long, device=device)
        if self.start is not None and keep_rows is not None:
            self.start = self.start.index_select(0, keep_rows)
        self.start = start if self.start is None else torch.cat([self.start, start])
        for (own, cross), (k, v) in zip(self.caches, memory_kv):
            if own.k is not None:
                own.add_rows(own.k.new_zeros(rows, *own.k.shape[1:2], 0, own.k.size(3)), None, keep_rows)
            cross.add_rows(k, v, keep_sentences)

    def shorten_memory(self, s: int) -> None:
        """The cross-attention caches keep their first s source positions (the longest source left)."""
        for _, cross in self.caches:
            cross.length = min(cross.length, s)

    def forget_slots(self) -> None:
        """The slots before every row's start leave the self-attention caches (no row reads them), when
        they are half of them: a search that takes sentences in for ever keeps a bounded cache."""
        if self.start is None or not len(self.start):
            return
        first = int(self.start.min())
        if 2 * first < self.steps:
            return
        for own, _ in self.caches:
            own.drop_slots(first)
        self.steps -= first
        self.start -= first


@dataclass(frozen=True)
class WeightRequest:
    """Which layers return attention weights, per kind; negative indices count from the end."""

    encoder: tuple[int, ...] = ()
    decoder: tuple[int, ...] = ()
    cross: tuple[int, ...] = ()

    @staticmethod
    def wanted(need: "bool | WeightRequest", kind: str, n_layers: int) -> list[bool]:
        """For each of a stack's `n_layers` layers, whether its `kind` weights are asked for."""
        if isinstance(need, bool):
            return [need] * n_layers
        layers = {i % n_layers for i in getattr(need, kind) if -n_layers <= i < n_layers}
        return [i in layers for i in range(n_layers)]


@dataclass
class AttentionWeights:
    """Per-layer attention weights, each (B, H, T_q, T_k); lists are empty unless asked for,
    and hold None for the layers a `WeightRequest` leaves out."""

    encoder: list[Tensor] = field(default_factory=list)
    decoder: list[Tensor] = field(default_factory=list)
    cross: list[Tensor] = field(default_factory=list)


class Embedding(nn.Module):
    """Token embedding × √d_model plus sinusoidal positions, then dropout. With rotary
    positions nothing is added: self-attention places the tokens instead."""

    def __init__(self, cfg: ModelConfig, tokens: nn.Embedding):
        super().__init__()
        self.tokens = tokens
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.dropout = nn.Dropout(cfg.dropout)
        self.max_positions = cfg.max_positions
        self.cfg = cfg
        self.register_buffer("positions", None, persistent=False)
        self.fill_tables()

    def fill_tables(self) -> None:
        """The sinusoidal table, a buffer the state dict leaves out (it is computed, never trained)."""
        c = self.cfg
        if c.positions == "sinusoidal":
            self.positions = sinusoidal_positions(c.max_positions, c.d_model, c.sinusoidal_layout, c.pad_id)

    def forward(self, ids: Tensor, offset: int | Tensor = 0) -> Tensor:
        """ids (B, T) at positions offset .. offset+T-1 -> (B, T, D); offset (B,): each row's own."""
        t = ids.size(1)
        per_row = isinstance(offset, Tensor)
        if not per_row and offset + t > self.max_positions:  # a row's own offset is within its length limit
            raise ValueError(f"sequence of {offset + t} tokens exceeds max_positions={self.max_positions}")
        x = self.tokens(ids) * self.scale
        if self.positions is not None:
            at = offset[:, None] + torch.arange(t, device=ids.device) if per_row else slice(offset, offset + t)
            x = x + self.positions[at]
        return self.dropout(x)


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        src_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        tgt_vocab = cfg.target_vocab_size
        tgt_tokens = src_tokens if cfg.tie_embeddings else nn.Embedding(tgt_vocab, cfg.d_model, cfg.pad_id)
        self.src_embed = Embedding(cfg, src_tokens)
        self.tgt_embed = Embedding(cfg, tgt_tokens)
        # One rotation table serves every self-attention layer (its buffers are not saved).
        rotary = RotaryPositions(cfg.d_model // cfg.n_heads, cfg.max_positions) if cfg.positions == "rotary" else None
        self.encoder_layers = nn.ModuleList(EncoderLayer(cfg, rotary) for _ in range(cfg.encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(cfg, rotary) for _ in range(cfg.decoder_layers))
        # Pre-LN leaves the residual stream unnormalised, so each stack ends with a layer norm.
        self.encoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.output = Linear(cfg.d_model, tgt_vocab, bias=cfg.output_bias)
        self.sites = sites(("encoder_out", "decoder_out", "logits"))  # the model's own (qkvmt.model.sites)
        self.reset_parameters()
        self.tie()

    def tie(self) -> None:
        if self.cfg.output_tied:
            self.output.weight = self.tgt_embed.tokens.weight

    @classmethod
    def from_weights(cls, cfg: ModelConfig, weights: dict[str, Tensor]) -> "Transformer":
        """The model of `cfg` whose parameters are the tensors `weights` themselves (float32, as a freshly
        built model's): built on the meta device and given them by assignment, so loading holds the weights
        once, not twice, and spends nothing on an initialisation they replace. A weight that is missing,
        left over or of another shape is load_state_dict's RuntimeError."""
        with torch.device("meta"):
            model = cls(cfg)
        dtypes = {k: v.dtype for k, v in model.state_dict().items()}
        cast = {k: v.to(dtypes[k]) if isinstance(v, Tensor) and k in dtypes else v for k, v in weights.items()}
        model.load_state_dict(cast, assign=True)
        model.tie()  # assignment gave the output its own Parameter
        for module in model.modules():  # the computed tables, left on the meta device
            if hasattr(module, "fill_tables"):
                module.fill_tables()
        return model

    def reset_parameters(self) -> None:
        # Xavier for projections (as in the paper); N(0, d^-1/2) for embeddings, so that
        # embedding × √d has unit scale.
        for name, p in self.named_parameters():
            if p.dim() > 1 and "tokens" not in name:
                # W_Q, W_K, W_V (those in use) are stacked in w_qkv: each gets the init of its own (D, D) matrix
                for block in p.split(self.cfg.d_model) if name.endswith("w_qkv.weight") else (p,):
                    nn.init.xavier_uniform_(block)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        for emb in {self.src_embed.tokens, self.tgt_embed.tokens}:
            nn.init.normal_(emb.weight, 0.0, self.cfg.d_model**-0.5)
            nn.init.zeros_(emb.weight[self.cfg.pad_id])

    def source_mask(self, src: Tensor) -> Tensor:
        return (src != self.cfg.pad_id)[:, None, None, :]  # (B, 1, 1, S)

    def encode(self, src: Tensor, need_weights: "bool | WeightRequest" = False) -> tuple[Tensor, Tensor, list]:
        """src: (B, S) ids. Returns memory (B, S, D), src_mask (B, 1, 1, S), per-layer weights."""
        src_mask = self.source_mask(src)
        x = self.src_embed(src)
        wanted = WeightRequest.wanted(need_weights, "encoder", len(self.encoder_layers))
        weights = []
        for layer, want in zip(self.encoder_layers, wanted):
            x, w = layer(x, src_mask, want)
            weights.append(w)
        return self.sites["encoder_out"](self.encoder_norm(x)), src_mask, weights if any(wanted) else []

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        state: DecoderState | None = None,
        need_weights: "bool | WeightRequest" = False,
        last_only: bool = False,
        project: bool = True,
        self_mask: Tensor | None = None,
        depth: int | None = None,
    ) -> tuple[Tensor, list, list]:
        """tgt: (B, T) target ids, BOS first; with `state`, only the ids not yet decoded (one a row where
        its rows began at different steps, state.start: each row at its own position, the cache slots
        before its start masked).

        Returns logits (B, T, V), or (B, 1, V) for the last position only with `last_only`
        (search needs no others, and the output layer is the costliest matrix product), and, if
        need_weights, per-layer self- and cross-attention weights. With project=False, the
        final states (B, T, D) instead of logits: training's loss applies the output layer
        itself, chunk by chunk (qkvmt.model.loss.output_loss).
        self_mask: (B, 1, 1, T), True on real target tokens, in place of the causal mask: each row
        sees the whole target, as a head supervised with full context is read.
        depth: only the first `depth` layers run, for a reading of their weights that needs no
        later layer; the states returned are then layer depth-1's, not the model's.
        """
        offset, positions = (state.steps if state is not None else 0), None
        if state is not None and state.start is not None:  # rows that began at different steps, a token each
            positions = offset - state.start  # (B,) each row's own
            slots = torch.arange(offset + tgt.size(1), device=tgt.device)
            self_mask = (slots >= state.start[:, None])[:, None, None, :]  # (B, 1, 1, slots): none before its start
        x = self.tgt_embed(tgt, offset if positions is None else positions)
        n = len(self.decoder_layers)
        want_self, want_cross = (
            WeightRequest.wanted(need_weights, "decoder", n),
            WeightRequest.wanted(need_weights, "cross", n),
        )
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder_layers[:depth]):
            cache = state.caches[i] if state is not None else None
            x, self_w, cross_w = layer(x, memory, src_mask, (want_self[i], want_cross[i]), cache, self_mask, positions)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        self_ws, cross_ws = (self_ws if any(want_self) else []), (cross_ws if any(want_cross) else [])
        if state is not None:
            state.steps += tgt.size(1)
        if last_only:
            x = x[:, -1:]
        x = self.sites["decoder_out"](self.decoder_norm(x))
        return (self.sites["logits"](self.output(x)) if project else x), self_ws, cross_ws

    def target_mask(self, tgt: Tensor) -> Tensor:
        """(B, 1, 1, T), True on real target tokens: decode's self_mask for full context."""
        return (tgt != self.cfg.pad_id)[:, None, None, :]

    def memory_keys_values(self, memory: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each decoder layer's cross-attention K and V of `memory` (B, S, D), as its cache holds them."""
        return [layer.cross_attn.memory_keys_values(memory) for layer in self.decoder_layers]

    def new_state(self, length: int = 16) -> DecoderState:
        """An empty decoding state whose self-attention caches first make room for `length` positions."""
        return DecoderState([(KVCache(length), KVCache()) for _ in self.decoder_layers])

    def forward(
        self, src: Tensor, tgt: Tensor, need_weights: "bool | WeightRequest" = False, project: bool = True
    ) -> tuple[Tensor, AttentionWeights]:
        """Teacher-forced pass: logits (B, T, V) for every target position (the final states
        (B, T, D) with project=False), and the attention."""
        memory, src_mask, enc_w = self.encode(src, need_weights)
        out, dec_w, cross_w = self.decode(tgt, memory, src_mask, need_weights=need_weights, project=project)
        return out, AttentionWeights(enc_w, dec_w, cross_w)
