"""Command-line helpers shared by scripts/*.py."""

import re

TEXT_KEYS = ("sentence", "reference")


def quote_text_overrides(argv: list[str], keys=TEXT_KEYS) -> list[str]:
    """Quote free-text overrides (sentence=..., reference=...) for Hydra's grammar.

    The shell removes the user's quotes, and Hydra would read `sentence=Ein Mann, der lacht` as
    a list, reject letters like "ä" outside quotes, and resolve `${...}`. The value is always
    taken as literal text.
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in keys:
            # Inside Hydra's quotes a backslash escapes only a quote (or the closing quote), so
            # only backslash runs before a quote or at the end are doubled.
            escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
            escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped).replace("${", "\\${")
            arg = f"{key}='{escaped}'"
        out.append(arg)
    return out
