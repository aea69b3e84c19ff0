"""Requests that arrive together translated together: one worker thread owns the model (a model
is not safe to call from many threads at once, and one call over many sentences fills a batch
that single requests leave mostly empty), drains the queue of waiting requests, translates all
their sentences in one call per decoding setting and hands each request its own slice, in order.
"""

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
    """`submit` from any thread; `translate` runs on the worker thread alone, until `close`."""

    def __init__(self, translate: Translate):
        self.translate = translate
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.worker = threading.Thread(target=self._run, name="qkvmt-serve-batcher", daemon=True)
        self.worker.start()

    def submit(self, sentences: list[str], settings: DecodeConfig) -> Future:
        """A future of the translations of `sentences`, in order."""
        job = Job(list(sentences), settings, Future())
        self.jobs.put(job)
        return job.done

    def close(self) -> None:
        """Stop the worker once the requests already waiting are answered."""
        self.jobs.put(None)
        self.worker.join()

    def _run(self) -> None:
        while True:
            waiting = [self.jobs.get()]  # blocks until a request comes
            while not self.jobs.empty():
                waiting.append(self.jobs.get_nowait())
            jobs = [j for j in waiting if j is not None]
            for group in by_settings(jobs):
                self._answer(group)
            if len(jobs) < len(waiting):  # close() was called: the requests before it are answered
                return

    def _answer(self, jobs: list[Job]) -> None:
        lines = [s for j in jobs for s in j.sentences]
        try:
            out = list(self.translate(lines, jobs[0].settings))
        except Exception as e:  # each request answers with it; the worker keeps serving the next
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
