"""Requests that arrive together translated together: one loop owns the model (a model is not
safe to call from many threads at once, and one call over many sentences fills a batch that
single requests leave mostly empty), drains the queue of waiting requests, translates all their
sentences in one call per decoding setting and hands each request its own slice, in order.

The loop runs on the thread that calls `run`: the command's main thread, with the HTTP server in
another. torch's CPU operators ran a beam search about a fifth slower on a thread started after
the model was loaded than on the main thread (2 Zen 5 cores, measured), so the decoding stays there.
"""

import contextlib
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass

from qkvmt.decoding.search import DecodeConfig

Translate = Callable[[list[str], DecodeConfig], Sequence[str]]  # Model.translate, or the CTranslate2 engine's


@dataclass
class Job:
    sentences: list[str]
    settings: DecodeConfig
    done: Future


class Batcher:
    """`submit` from any thread; `run` translates on its caller's thread, until `close`."""

    def __init__(self, translate: Translate):
        self.translate = translate
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()

    def submit(self, sentences: list[str], settings: DecodeConfig) -> Future:
        """A future of the translations of `sentences`, in order."""
        job = Job(list(sentences), settings, Future())
        self.jobs.put(job)
        return job.done

    def close(self) -> None:
        """`run` returns once the requests already waiting are answered."""
        self.jobs.put(None)

    def run(self) -> None:
        """Answer requests as they come, until `close` (Ctrl-C interrupts it between calls)."""
        while True:
            waiting = [self.jobs.get()]  # blocks until a request comes
            while not self.jobs.empty():
                waiting.append(self.jobs.get_nowait())
            jobs = [j for j in waiting if j is not None]
            for group in by_settings(jobs):
                self._answer(group)
            if len(jobs) < len(waiting):  # close() was called: the requests before it are answered
                return

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
        except Exception as e:  # each request answers with it; the loop keeps serving the next
            for j in jobs:
                j.done.set_exception(e)
            return
        start = 0
        for j in jobs:
            j.done.set_result(out[start : start + len(j.sentences)])
            start += len(j.sentences)


def by_settings(jobs: list[Job]) -> list[list[Job]]:
    """The jobs grouped by decoding settings (one call decodes with one), in order of arrival."""
    groups: dict[tuple, list[Job]] = {}
    for j in jobs:
        groups.setdefault(tuple(sorted(asdict(j.settings).items())), []).append(j)
    return list(groups.values())
