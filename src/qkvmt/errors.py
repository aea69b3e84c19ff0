"""User errors: mistakes in input or configuration that the user can fix.

Entry points print them as one line, with no traceback, and exit non-zero.
"""

import functools
import importlib
import sys

from qkvmt.console import quiet_known_noise


class UserError(ValueError):
    """A problem with the user's input; the message names the file or value and says what to do."""


def optional_import(module: str, install: str, name: str | None = None):
    """`module` imported, for a feature that needs an optional package; if it is missing, a
    UserError naming it (as `name`, default the module) and saying how to `install` it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"{name or module} is not installed: {install}") from None


def user_error_of(e: BaseException) -> UserError | None:
    """The UserError that `e` is, or was raised from (Hydra wraps errors raised while building
    configured objects in its own), else None."""
    while e is not None and not isinstance(e, UserError):
        e = e.__cause__
    return e


def report_user_errors(fn):
    """Wrap an entry point: a UserError becomes `error: <message>` on stderr and exit code 2,
    Ctrl-C one line and exit code 130; known third-party noise is filtered from the console
    (qkvmt.console)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        quiet_known_noise()
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            # Outputs are staged and moved into place only when complete: nothing half-written remains.
            print("error: interrupted (Ctrl-C)", file=sys.stderr)
            sys.exit(130)
        except Exception as e:
            cause = user_error_of(e)
            if cause is None:
                raise
            # One line, even when the message quotes a library's multi-line error.
            print(
                "error: " + " ".join(line.strip() for line in str(cause).splitlines() if line.strip()), file=sys.stderr
            )
            sys.exit(2)

    return wrapper
