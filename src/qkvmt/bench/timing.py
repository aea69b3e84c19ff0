"""Timed training steps and timed beam search, the same work for every system.

Training: each system gets the same token-budget batches in the same order, with its own Adam;
a step is forward, label-smoothed loss, backward and optimizer step, timed between device
synchronisations (the benchmark's, not the training step's). Systems take turns in rounds, so
a slow drift of the machine (turbo, a neighbour) touches all of them alike.

Decoding: beam search forced to one output length (EOS banned before it, and the only choice
at it), so every system does the same number of decoder steps on the same sentences.
"""

import logging
import statistics
import time
from collections.abc import Callable

import torch
from torch import Tensor, nn

from qkvmt.decoding.engine import generate
from qkvmt.decoding.search import DecodeConfig
from qkvmt.model.loss import translation_loss
from qkvmt.training.matmul_rows import LINEAR_ROW_MULTIPLE, few_matmul_shapes

log = logging.getLogger(__name__)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class TrainTimer:
    """One system's training steps: its model, its optimizer, and the seconds each step took."""

    def __init__(self, model: nn.Module, device: torch.device, dtype: torch.dtype | None, pad_id: int):
        self.model = model.to(device).train()
        # fused, as training runs it (conf/module/default.yaml)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
        self.device, self.dtype, self.pad_id = device, dtype, pad_id
        self.seconds: list[float] = []

    def step(self, batch: dict) -> float:
        src, tgt_in, tgt_out = (batch[k].to(self.device, non_blocking=True) for k in ("src", "tgt_in", "tgt_out"))
        sync(self.device)
        start = time.perf_counter()
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
            if hasattr(self.model, "loss"):  # ours: the loss exactly as training computes it, rows padded as there
                with few_matmul_shapes(LINEAR_ROW_MULTIPLE):
                    loss = self.model.loss(src, tgt_in, tgt_out, label_smoothing=0.1)
            else:
                loss = translation_loss(self.model(src, tgt_in), tgt_out, self.pad_id, label_smoothing=0.1)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        sync(self.device)
        return time.perf_counter() - start


def time_training(
    timers: dict[str, TrainTimer], batches: list[dict], warmup: int, steps: int, rounds: int, flops: list[float]
) -> dict:
    """Medians per system over `steps` timed steps after `warmup` untimed ones.

    flops: the model FLOPs of each batch (see qkvmt.bench.flops).
    Returns {name: {"tgt_tok_s", "tok_s", "tflop_s", "step_ms", "steps"}}: target tokens/s,
    source+target tokens/s, model TFLOP/s, milliseconds per step.
    """
    log.info("  warm-up: %d steps per system", warmup)
    for timer in timers.values():
        for i in range(warmup):
            timer.step(batches[i % len(batches)])
    per_round = max(1, steps // rounds)
    rates = {name: {"tgt": [], "all": [], "flop": [], "s": []} for name in timers}
    for r in range(rounds):
        for name, timer in timers.items():
            log.info("  round %d/%d: %s, %d timed steps", r + 1, rounds, name, per_round)
            for i in range(r * per_round, (r + 1) * per_round):
                j = (warmup + i) % len(batches)
                batch = batches[j]
                s = timer.step(batch)
                rates[name]["flop"].append(flops[j] / s / 1e12)
                src_tokens = int((batch["src"] != timer.pad_id).sum())
                rates[name]["tgt"].append(batch["ntokens"] / s)
                rates[name]["all"].append((batch["ntokens"] + src_tokens) / s)
                rates[name]["s"].append(s)
    return {
        name: {
            "tgt_tok_s": statistics.median(r["tgt"]),
            "tok_s": statistics.median(r["all"]),
            "tflop_s": statistics.median(r["flop"]),
            "step_ms": 1000 * statistics.median(r["s"]),
            "steps": len(r["s"]),
        }
        for name, r in rates.items()
    }


def timed_batches(loader, n: int) -> tuple[list[dict], float | None]:
    """The first n batches of `loader`, and the median milliseconds of building one in this
    process (the first left out: it starts the iterator). The recipes build batches in the
    training process (data.num_workers=0), so a step waits that long for its batch."""
    it, batches, ms = iter(loader), [], []
    for i in range(n):
        start = time.perf_counter()
        batch = next(it, None)
        if batch is None:
            break
        if i:
            ms.append(1e3 * (time.perf_counter() - start))
        batches.append(batch)
    return batches, (statistics.median(ms) if ms else None)


def time_call(fn: Callable[[], object], device: torch.device, repeats: int) -> tuple[float, object]:
    """Median seconds of `repeats` calls after one untimed warm-up call, and the last result."""
    last = {}

    def call():
        last["result"] = fn()

    return time_in_turns({"call": call}, device, repeats)["call"], last["result"]


def time_in_turns(fns: dict[str, Callable[[], object]], device: torch.device, repeats: int) -> dict[str, float]:
    """Each function's median seconds of `repeats` calls after one untimed warm-up call each, the
    functions taking turns call by call, so a drift of the machine touches all of them alike."""
    return {name: statistics.median(s) for name, s in seconds_in_turns(fns, device, repeats).items()}


def seconds_in_turns(fns: dict[str, Callable[[], object]], device: torch.device, repeats: int) -> dict[str, list]:
    """Each function's seconds of each turn, as time_in_turns takes them: turn i of every function
    ran side by side, so their ratio turn by turn leaves out what the machine did between turns."""
    for fn in fns.values():
        fn()
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            sync(device)
            start = time.perf_counter()
            fn()
            sync(device)
            seconds[name].append(time.perf_counter() - start)
    return seconds


def ours_fixed_length(model, src: Tensor, beam_size: int, length: int, use_cache: bool, **engine) -> Callable[[], list]:
    """Our beam search, every hypothesis exactly `length` tokens (EOS last); `engine`: decode.compile and
    decode.compute_type, if given (the eager step in float32 by default)."""
    engine = {"compile": "false"} | engine
    cfg = DecodeConfig(
        beam_size=beam_size, max_len_a=0.0, max_len_b=length, min_len=length, use_cache=use_cache, **engine
    )

    def run():
        hyps = generate(model, src, cfg)
        if any(len(h.tokens) != length - 1 for h in hyps):
            raise RuntimeError("a hypothesis missed the forced length: the comparison would be unequal")
        return hyps

    return run


def hf_fixed_length(marian, src: Tensor, beam_size: int, length: int) -> Callable[[], Tensor]:
    """Hugging Face generate with the same beam and exactly `length` new tokens."""
    model = marian.model
    pad = model.config.pad_token_id

    @torch.no_grad()
    def run():
        out = model.generate(
            input_ids=src,
            attention_mask=src != pad,
            num_beams=beam_size,
            do_sample=False,
            min_new_tokens=length,
            max_new_tokens=length,
            length_penalty=1.0,
        )
        if out.size(1) != length + 1:  # the start token and `length` new ones
            raise RuntimeError(f"HF generate made {out.size(1) - 1} tokens, not {length}")
        return out

    return run


def ct2_fixed_length(translator, sources: list[list[str]], beam_size: int, length: int) -> Callable[[], list]:
    """CTranslate2's beam search with exactly `length` decoder steps per sentence, as ours
    (length - 1 tokens and the forced EOS) and HF's (`length` new tokens) take."""

    def run():
        out = translator.translate_batch(
            sources,
            beam_size=beam_size,
            min_decoding_length=length,
            max_decoding_length=length,
            length_penalty=1.0,
            max_input_length=0,
        )
        if any(len(r.hypotheses[0]) != length for r in out):
            raise RuntimeError("a CTranslate2 hypothesis missed the forced length: the comparison would be unequal")
        return out

    return run


def ratio(a, b):
    """a / b, or None where either is missing (a system that did not run)."""
    return a / b if a is not None and b else None
