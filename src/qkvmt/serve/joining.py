"""The server's loop with continuous batching: a request's sentences join the search in progress at
its next step, and each request is answered as soon as its own sentences are done, whatever the
others do (qkvmt.decoding.running).

Requests that arrive while the server is idle start a search together, within Batching's gap_ms
and max_wait_ms as calls do (qkvmt.serve.batcher). A request whose decoding settings differ from
the running search's waits until it ends, then starts the next one with the others of its settings;
meanwhile no later request joins the running one, so a stream of them cannot keep it waiting.
A request whose text cannot join (its encoding fails) is answered with its error alone; a search
that fails answers its requests with the error, and the loop goes on with the next.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict
from itertools import takewhile

from qkvmt.decoding.lines import RunningLines, cannot_join
from qkvmt.decoding.search import DecodeConfig
from qkvmt.errors import UserError
from qkvmt.serve.batcher import Batcher, Batching, Job, settle

Running = Callable[[DecodeConfig], AbstractContextManager[RunningLines]]  # Model.running


class Joining(Batcher):
    """A Batcher whose requests join a running search (`running(settings)`, Model.running) at its next step."""

    def __init__(self, running: Running, batching: Batching = Batching()):
        super().__init__(translate=None, batching=batching)
        self.running = running

    def run(self) -> None:
        """Answer requests as they come, until `close`."""
        closing = False
        while True:
            if not any(not j.done.done() for j in self.taken):
                if closing:
                    return
                closing = self.gather()
            waiting = [j for j in self.taken if not j.done.done()]
            if waiting:
                closing |= self.search(waiting[0].settings)

    def search(self, settings: DecodeConfig) -> bool:
        """One search of `settings`, of the requests of those settings in `taken` and those that come
        while it runs; each request leaves `taken` when answered. Whether close() was called meanwhile."""
        # joined: each request joined and not yet answered, by id (held, so no id is reused meanwhile), and its
        # translations, None where not yet done
        closing, joined, waited = False, {}, 0
        try:
            with self.running(settings) as search:
                while True:
                    # those that came before any of other settings: a later one waits for theirs to be served
                    waiting = (j for j in self.taken if not j.done.done() and id(j) not in joined)
                    new = list(takewhile(lambda j: same(j.settings, settings), waiting))
                    waited = waited + 1 if new else 0
                    if joins_now(sum(len(j.sentences) for j in new), len(search), waited):
                        self.add(search, new, joined)
                        waited = 0
                    self.taken = [j for j in self.taken if not j.done.done()]
                    if not len(search):
                        return closing
                    for (job, i), text in search.step():
                        answered(job, i, text, joined)
                    closing |= self.drain()
        except Exception as e:  # its requests learn of it (all of its settings, if it never started)
            for job in self.taken:
                if id(job) in joined or (not joined and same(job.settings, settings)):
                    settle(job.done, error=e)
            self.taken = [j for j in self.taken if not j.done.done()]
            return closing

    def add(self, search: RunningLines, jobs: list[Job], joined: dict) -> None:
        """The sentences of `jobs` join the search together; a request that cannot join is answered with
        its error (the others join without it)."""
        if not jobs:
            return
        for job in jobs:
            joined[id(job)] = (job, [None] * len(job.sentences))
        try:
            empty = search.join(
                [s for j in jobs for s in j.sentences], [(j, i) for j in jobs for i in range(len(j.sentences))]
            )
        except Exception as e:
            if len(jobs) > 1:  # each alone: the fault stays with the request that caused it
                for job in jobs:
                    self.add(search, [job], joined)
            elif jobs:
                settle(jobs[0].done, error=e)
                del joined[id(jobs[0])]
            return
        for (job, i), text in empty:
            answered(job, i, text, joined)
        for job in jobs:
            if not job.sentences:  # nothing to translate: answered at once
                settle(job.done, [])
                del joined[id(job)]


# Where batching.continuous=auto joins searches in progress: not on a CPU, where 16 clients of 4 sentences a
# request were served at 105 sentences/s joining and 122 in calls (2 Zen 5 cores, bundled model, beam 5): the
# rows that join pad every row's self-attention to the oldest row's length, and each join encodes and copies.
# On a GPU, where that padding costs little and a step's launches most, it is the case joining is for (not
# measured yet).
DEVICES_THAT_JOIN = ("cuda",)

# Sentences join a search in progress together, once they are a JOIN_SHARE-th of those in it or have waited
# JOIN_STEPS steps: each join encodes its sentences and copies every cache row once, which one joining
# request's sentences would not repay (measured on 2 Zen 5 cores, model=small's size).
JOIN_SHARE, JOIN_STEPS = 4, 4


def joins_now(waiting: int, running: int, waited: int) -> bool:
    """Whether `waiting` sentences, waiting `waited` steps, join a search of `running` sentences now."""
    return waiting > 0 and (not running or JOIN_SHARE * waiting >= running or waited >= JOIN_STEPS)


def answered(job: Job, i: int, text: str, joined: dict) -> None:
    """Sentence i of `job` is translated; the request is answered once all of its are (and the search
    holds it no more: one that never ends must not keep every request it served)."""
    _, out = joined[id(job)]
    out[i] = text
    if None not in out:
        settle(job.done, out)
        del joined[id(job)]


def same(a: DecodeConfig, b: DecodeConfig) -> bool:
    return asdict(a) == asdict(b)


def batcher_for(engine, batching: Batching, settings: DecodeConfig) -> Batcher:
    """The server's loop for `engine` (a Model, or the CTranslate2 engine's): requests joining a running
    search, or calls of the requests waiting together. batching.continuous=true joins, or is a UserError
    where the engine or `settings` cannot; auto joins where the model runs on a GPU, whose step costs
    about as much for a few rows as for many, and calls on a CPU, where a step's cost grows with its
    rows and joining measured slower (DEVICES_THAT_JOIN); false calls."""
    why_not = cannot_join(settings) if hasattr(engine, "running") else "engine=ctranslate2 translates call by call"
    if batching.continuous == "true" and why_not:
        raise UserError(f"batching.continuous=true, but {why_not}; or set batching.continuous=auto or false")
    auto_calls = batching.continuous == "auto" and (why_not or engine.device.type not in DEVICES_THAT_JOIN)
    if batching.continuous == "false" or auto_calls:
        return Batcher(engine.translate, batching)
    return Joining(engine.running, batching)
