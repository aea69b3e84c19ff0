"""Command-line helpers shared by scripts/*.py."""

import re

TEXT_KEYS = ("sentence", "reference")


def quote_text_overrides(argv: list[str], keys=TEXT_KEYS) -> list[str]:
    """Quote free-text overrides (sentence=..., reference=...) for Hydra's grammar.

    The shell removes the user's quotes, and Hydra would read `sentence=Ein Mann, der lacht` as
    a list and reject letters like "ä" outside quotes. A value the user already quoted for Hydra
    is left alone.
    """
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        quoted = len(value) > 1 and value[0] in "'\"" and value[-1] == value[0]
        if sep and key in keys and not quoted:
            # Inside Hydra's quotes a backslash escapes only a quote (or the closing quote), so
            # only backslash runs before a quote or at the end are doubled.
            escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
            escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped)
            arg = f"{key}='{escaped}'"
        out.append(arg)
    return out
