"""A translation request's body checked against the server's limits: {"sentences": [text, ...]},
and the decoding settings a request may change for itself. Every refusal is a Refused with the
HTTP status it answers with (400 for a malformed request, 413 for one over a limit)."""

import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.setting_types import as_typed
from qkvmt.text.visible import visible_text

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
    head_seconds: int  # the longest wait for a request's line and headers: a connection stalled longer is closed

    def __post_init__(self):
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"limits.{name}={as_typed(value)}: give a whole number of at least 1")


def limits_of(settings, prefix: str = "limits.") -> Limits:
    """Limits from a configuration's `limits` settings, or an error naming `prefix` + the setting
    for one that is not a limit, is missing, or is not a whole number of at least 1."""
    names = [f.name for f in fields(Limits)]
    every = ", ".join(prefix + n for n in names[:-1]) + f" and {prefix}{names[-1]}"
    if not isinstance(settings, Mapping):  # limits=5: the whole group replaced by one value
        raise UserError(f"{prefix.rstrip('.')}={as_typed(settings)}: set the limits one by one: {every}")
    unknown = sorted(set(settings) - set(names), key=str)
    if unknown:
        raise UserError(f"{prefix}{unknown[0]} is no limit: the limits are {every}")
    missing = [n for n in names if n not in settings]
    if missing:  # ~limits.x: a server needs every limit
        raise UserError(f"{prefix}{missing[0]} is missing: give {prefix}{missing[0]}=, a whole number of at least 1")
    return Limits(**settings)


def parse(body, limits: Limits, settings: DecodeConfig) -> tuple[list[str], DecodeConfig]:
    """The request's sentences and its decoding settings (`settings` with the request's overrides)."""
    if not isinstance(body, dict):
        raise Refused(f"the request must be a JSON object {SHAPE}, not {json_kind(body)}")
    unknown = sorted(set(body) - {"sentences", *OVERRIDES})
    if unknown:
        raise Refused(
            f"unknown field(s) {', '.join(unknown)}: a request has sentences and may set {' and '.join(OVERRIDES)}"
        )
    return sentences_of(body.get("sentences"), limits), replace(settings, **overrides_of(body, limits))


def sentences_of(sentences, limits: Limits) -> list[str]:
    """The request's sentences, their visible text (one with none translates to "", as an empty one does)."""
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
    for i, sentence in enumerate(sentences):
        try:  # JSON's \ud800 escapes read into a lone surrogate, which no tokenizer can take
            sentence.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Refused(
                f"sentence {i} has {shown(sentence[e.start])} at character {e.start}, half a surrogate pair and no "
                "character: send valid Unicode text"
            ) from None
    return [visible_text(s) for s in sentences]


def overrides_of(body: dict, limits: Limits) -> dict:
    out = {}
    if "beam_size" in body:
        beam = body["beam_size"]
        if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= limits.beam_size:
            raise Refused(f"beam_size={shown(beam)}: give a whole number from 1 to {limits.beam_size}")
        out["beam_size"] = beam
    if "len_penalty" in body:
        alpha = finite(body["len_penalty"])
        if alpha is None or alpha < 0:
            raise Refused(f"len_penalty={shown(body['len_penalty'])}: give a number from 0 to {sys.float_info.max:.3g}")
        out["len_penalty"] = alpha
    return out


def finite(value) -> float | None:
    """`value` as a float, or None for what is no finite number (true and false are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # a whole number past a float's range: 1 and 400 zeros
        return None
    return number if math.isfinite(number) else None


def json_kind(value) -> str:
    """What `value` is, in JSON's words: null, true, a string, an array, ..."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    kinds = {str: "a string", int: "a number", float: "a number", list: "an array", dict: "an object"}
    return kinds.get(type(value), type(value).__name__)


def shown(value, most: int = 40) -> str:
    """`value` as JSON writes it, cut to `most` characters: an error echoes what came, within a line."""
    text = json.dumps(value)
    return text if len(text) <= most else f"{text[: most - 3]}... ({len(text):,} characters)"
