"""A translation request's body checked against the server's limits: {"sentences": [text, ...]},
and the decoding settings a request may change for itself. Every refusal is a Refused with the
HTTP status it answers with (400 for a malformed request, 413 for one over a limit)."""

import math
from dataclasses import dataclass, replace

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError

SHAPE = '{"sentences": ["...", ...]}'
# What a request may change for itself, within the server's own settings (the command's decode.*)
OVERRIDES = ("beam_size", "len_penalty")


class Refused(UserError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Limits:
    body_bytes: int  # the largest request body read
    sentences: int  # per request
    characters: int  # per sentence
    beam_size: int  # the largest beam a request may ask for

    def __post_init__(self):
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"limits.{name}={value!r}: give a whole number of at least 1")


def parse(body, limits: Limits, settings: DecodeConfig) -> tuple[list[str], DecodeConfig]:
    """The request's sentences and its decoding settings (`settings` with the request's overrides)."""
    if not isinstance(body, dict):
        raise Refused(f"the request must be a JSON object {SHAPE}, not {type(body).__name__}")
    unknown = sorted(set(body) - {"sentences", *OVERRIDES})
    if unknown:
        raise Refused(f"unknown field(s) {', '.join(unknown)}: a request has sentences and may set {OVERRIDES}")
    return sentences_of(body.get("sentences"), limits), replace(settings, **overrides_of(body, limits))


def sentences_of(sentences, limits: Limits) -> list[str]:
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
        raise Refused(f"sentences must be a list of strings: send {SHAPE}")
    if len(sentences) > limits.sentences:
        raise Refused(f"{len(sentences)} sentences: at most {limits.sentences} a request; send the rest in more", 413)
    longest = max(range(len(sentences)), key=lambda i: len(sentences[i]), default=None)
    if longest is not None and len(sentences[longest]) > limits.characters:
        raise Refused(
            f"sentence {longest} has {len(sentences[longest]):,} characters: at most {limits.characters:,} a sentence",
            413,
        )
    return sentences


def overrides_of(body: dict, limits: Limits) -> dict:
    out = {}
    if "beam_size" in body:
        beam = body["beam_size"]
        if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= limits.beam_size:
            raise Refused(f"beam_size={beam!r}: give a whole number from 1 to {limits.beam_size}")
        out["beam_size"] = beam
    if "len_penalty" in body:
        alpha = body["len_penalty"]
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
            raise Refused(f"len_penalty={alpha!r}: give a number of at least 0")
        out["len_penalty"] = float(alpha)
    return out
