"""The JSON files of a Hugging Face folder (config.json, generation_config.json, vocab.json, tokenizer_config.json,
...) read and their values typed, each fault one line naming the file and the key, whatever the file holds."""

import json
from pathlib import Path

from qkvmt.errors import UserError
from qkvmt.setting_types import WANTED, fits


def read_json(path: Path) -> dict:
    """The JSON object in `path`; a UserError saying why there is none (unreadable, not UTF-8, not JSON,
    nested past the parser's stack, or another value than an object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:  # brackets nested past the parser's stack
        raise UserError(f"{path} is not readable JSON: it nests deeper than Python's parser goes") from None
    except (OSError, ValueError) as e:  # ValueError: not UTF-8 (UnicodeDecodeError) or not JSON
        raise UserError(f"{path} is not readable JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object (it holds {shown(data)})")
    return data


def shown(value) -> str:
    """`value` as the file writes it, cut short: a value may be as long as its file."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def typed(where: Path, key: str, value, wanted: type, give: str, ok=lambda v: True, null: bool = False):
    """`value`, the setting `key` of the file `where`, if it is a `wanted` (bool, int or float; or null, where
    `null`) for which `ok` holds; else a UserError naming the file and the key and saying to `give`."""
    if value is None and null:
        return None
    if not fits(value, wanted):
        raise UserError(f"{where}: {key}={shown(value)} is not {WANTED[wanted]}; give {give}")
    if not ok(value):
        raise UserError(f"{where}: {key}={shown(value)}: give {give}")
    return value


def token_text(where: Path, key: str, value) -> str:
    """The special token `key` of tokenizer_config.json `where`: its text, or the text of the object older
    files write in its place (an AddedToken's fields, "content" among them); else a UserError naming the key."""
    text = value.get("content") if isinstance(value, dict) else value
    if not isinstance(text, str):
        raise UserError(f"{where}: {key}={shown(value)} is not a token; give the token's text, a string")
    return text
