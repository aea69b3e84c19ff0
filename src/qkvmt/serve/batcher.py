"""Requests that arrive together translated together: one loop owns the model (a model is not
safe to call from many threads at once, and one call over many sentences fills a batch that
single requests leave mostly empty), drains the queue of waiting requests, translates all their
sentences in one call per decoding setting and hands each request its own slice, in order. A
call that fails is made again request by request: a fault stays with the request that caused it.

Clients answered by one call send their next requests while the others' already wait: taking
only what waits, calls settle into alternating halves of the clients. With Batching's gap_ms, the
loop keeps taking requests while each comes within gap_ms of the one before (for at most
max_wait_ms), so the ones just answered join the next call.

The loop runs on the thread that calls `run`: the command's main thread, with the HTTP server in
another. torch's CPU operators ran a beam search about a fifth slower on a thread started after
the model was loaded than on the main thread (2 Zen 5 cores, measured), so the decoding stays there.
"""

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import asdict, dataclass, fields

from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.serve.requests import finite
from qkvmt.setting_types import as_typed

Translate = Callable[[list[str], DecodeConfig], Sequence[str]]  # Model.translate, or the CTranslate2 engine's


@dataclass
class Job:
    sentences: list[str]
    settings: DecodeConfig
    done: Future


@dataclass(frozen=True)
class Batching:
    """How long a call waits for more requests to join it (0 and 0: it takes only those waiting)."""

    gap_ms: float = 0.0  # it keeps taking requests while each comes within gap_ms of the one before
    max_wait_ms: float = 0.0  # but starts at most max_wait_ms after the loop took the first
    # auto: requests join a running search at its next step where the engine can (qkvmt.serve.joining), and
    # then the waits above apply to a search started while none runs; true: that or an error; false: calls
    continuous: str = "auto"


def batching_of(settings, prefix: str) -> Batching:
    """Batching from a configuration's `batching` settings, an error naming `prefix` + the setting
    for a value that is not a number of milliseconds, or that waits for nothing beside the other."""
    values = dict(settings)
    unknown = sorted(set(values) - {f.name for f in fields(Batching)})
    if unknown:
        raise UserError(
            f"{prefix}{unknown[0]} is no batching setting: use {prefix}gap_ms, {prefix}max_wait_ms or "
            f"{prefix}continuous"
        )
    if "continuous" in values:
        given = values["continuous"]
        values["continuous"] = {True: "true", False: "false"}.get(given, given)  # Hydra reads true as a boolean
        if values["continuous"] not in ("auto", "true", "false"):
            raise UserError(f"{prefix}continuous={given}: use auto, true or false")
    for name, value in values.items():
        if name == "continuous":
            continue
        if (ms := finite(value)) is None or ms < 0:
            raise UserError(f"{prefix}{name}={as_typed(value)}: give a number of milliseconds, at least 0")
    batching = Batching(**values)
    if (batching.gap_ms > 0) != (batching.max_wait_ms > 0):  # one of them 0: no call would ever wait
        raise UserError(
            f"{prefix}gap_ms={batching.gap_ms:g} with {prefix}max_wait_ms={batching.max_wait_ms:g} waits for "
            "nothing: give both more than 0 for calls to wait, or both 0"
        )
    return batching


class Batcher:
    """`submit` from any thread; `run` translates on its caller's thread, until `close`."""

    def __init__(self, translate: Translate, batching: Batching = Batching()):
        self.translate = translate
        self.gap_s, self.max_wait_s = batching.gap_ms / 1000, batching.max_wait_ms / 1000
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.taken: list[Job] = []  # the next call's, until answered (after Ctrl-C, by answer_waiting)

    def submit(self, sentences: list[str], settings: DecodeConfig) -> Future:
        """A future of the translations of `sentences`, in order."""
        job = Job(list(sentences), settings, Future())
        self.jobs.put(job)
        return job.done

    def close(self) -> None:
        """`run` returns once the requests already waiting are answered."""
        self.jobs.put(None)

    def run(self) -> None:
        """Answer requests as they come, until `close`."""
        while True:
            closing = self.gather()
            for group in by_settings([j for j in self.taken if not j.done.done()]):  # none answered before a Ctrl-C
                self._answer(group)
            self.taken = []
            if closing:  # close() was called: the requests before it are answered
                return

    def gather(self) -> bool:
        """Take the next call's requests into `taken`: the first to come (it blocks until one does),
        those waiting, and those that come within the gap of the one before, until the longest wait
        after it took the first. True if close() was called: then it waits for no more."""
        first = self.jobs.get()
        if first is None:
            return self.drain(closing=True)
        self.taken.append(first)
        deadline = time.monotonic() + self.max_wait_s
        while (timeout := min(self.gap_s, deadline - time.monotonic())) > 0:
            try:
                job = self.jobs.get(timeout=timeout)
            except queue.Empty:
                break
            if job is None:
                return self.drain(closing=True)
            self.taken.append(job)
        return self.drain()

    def drain(self, closing: bool = False) -> bool:
        """Take every request waiting now into `taken`; whether close() was called (`closing`, or
        found among them)."""
        while not self.jobs.empty():
            job = self.jobs.get_nowait()
            if job is None:
                closing = True
            else:
                self.taken.append(job)
        return closing

    def answer_waiting(self) -> None:
        """Answer the requests waiting now, without waiting for more (a server that stops)."""
        self.close()
        self.run()

    @contextlib.contextmanager
    def in_thread(self):
        """`run` on a thread of its own while the block lasts (tests, which drive the server from
        this one); then it answers what is waiting and stops."""
        worker = threading.Thread(target=self.run, name="qkvmt-serve-batcher", daemon=True)
        worker.start()
        try:
            yield self
        finally:
            self.close()
            worker.join()

    def _answer(self, jobs: list[Job]) -> None:
        lines = [s for j in jobs for s in j.sentences]
        try:
            out = list(self.translate(lines, jobs[0].settings))
        except Exception as e:
            if len(jobs) > 1:  # one request's text may fail a call of many: each alone, so the others get theirs
                for j in jobs:
                    self._answer([j])
            else:  # the request answers with it; the loop keeps serving the next
                settle(jobs[0].done, error=e)
            return
        start = 0
        for j in jobs:
            settle(j.done, out[start : start + len(j.sentences)])
            start += len(j.sentences)


def settle(done: Future, result=None, error: Exception | None = None) -> None:
    """Answer a request, unless its client's wait was cancelled meanwhile (a dropped connection may
    cancel it): that one has no one to answer, and the loop must go on serving the others."""
    with contextlib.suppress(InvalidStateError):
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)


def by_settings(jobs: list[Job]) -> list[list[Job]]:
    """The jobs grouped by decoding settings (one call decodes with one), in order of arrival."""
    groups: dict[tuple, list[Job]] = {}
    for j in jobs:
        groups.setdefault(tuple(sorted(asdict(j.settings).items())), []).append(j)
    return list(groups.values())
