"""User errors: mistakes in input or configuration that the user can fix.

Entry points print them as one line, with no traceback, and exit non-zero.
"""

import functools
import sys


class UserError(Exception):
    """A problem with the user's input; the message names the file or value and says what to do."""


def report_user_errors(fn):
    """Wrap an entry point: a UserError becomes `error: <message>` on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)

    return wrapper
