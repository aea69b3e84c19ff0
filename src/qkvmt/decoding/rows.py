"""Whether a search in this thread keeps every sentence's rows in its batch to the end.

Beam search lets the sentences that are done leave its batch (qkvmt.decoding.search), so row i of
a later step's tensors may be another sentence than at the first. Whatever reads or edits the
model's tensors by row while a search runs (an edit of qkvmt.analysis.trace that says it keeps
rows, an encoder cut short by a lens, a forward hook of one's own on the model) opens
`rows_kept()` around it. It holds in the thread that opened it only, as the analysis's hooks
fire there only (qkvmt.analysis.hooks): another thread's search meanwhile is the model's own.
"""

import contextlib
import threading

_opened = threading.local()  # .count: how many rows_kept blocks this thread has open


@contextlib.contextmanager
def rows_kept():
    """Within the block, each search of this thread keeps every sentence's rows, in place, until
    the search ends (blocks nest)."""
    _opened.count = getattr(_opened, "count", 0) + 1
    try:
        yield
    finally:
        _opened.count -= 1


def are_rows_kept() -> bool:
    """Whether this thread is within a `rows_kept` block."""
    return getattr(_opened, "count", 0) > 0
