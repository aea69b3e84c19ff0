"""A lens, an edit or a trace hooks the model for the thread that opened it only: meanwhile
another thread's passes, searches and traces are the model's own, while the opening thread's
see the change (the explorer answers its page from a server thread while a notebook, or a test,
uses the same model in its own)."""

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from qkvmt.analysis.trace import KINDS, edited, trace
from qkvmt.studies.lens.passes import encoder_depth
from tests.analysis.test_trace import EXPLICIT_EDITS, close, no_hooks, noisy_model, pair, search_logits


def test_another_threads_passes_search_and_trace_see_the_model_while_this_thread_edits_it():
    model = noisy_model(norm_first=True)
    src, tgt = pair(model)
    where, edit = EXPLICIT_EDITS["k"]  # an explicit-path edit: it also switches its layer's kernel
    plain, plain_search = trace(model, src, tgt), search_logits(model, src, tgt)
    with encoder_depth(model, 1), edited(model, {where: edit, ("cross", 2, "heads"): torch.zeros_like}):
        mine = search_logits(model, src, tgt)
        with ThreadPoolExecutor(1) as other:
            their_search = other.submit(search_logits, model, src, tgt).result()
            their_trace = other.submit(trace, model, src, tgt).result()
    assert not torch.allclose(mine, plain_search, atol=1e-3)  # this thread's search was edited
    close(their_search, plain_search)
    close(their_trace.logits, plain.logits)
    for kind in KINDS:
        for theirs, own in zip(their_trace.layers[kind], plain.layers[kind]):
            close(theirs.k, own.k)
            close(theirs.weights, own.weights)
    assert no_hooks(model)


def test_an_edit_held_open_by_another_thread_reaches_its_passes_and_not_this_threads():
    model = noisy_model()
    src, tgt = pair(model)
    where, edit = EXPLICIT_EDITS["v"]
    plain, forced = trace(model, src, tgt), trace(model, src, tgt, edits={where: edit})
    assert not torch.allclose(forced.logits, plain.logits, atol=1e-3)
    opened, finish = threading.Event(), threading.Event()

    def hold():
        with edited(model, {where: edit}):
            opened.set()
            assert finish.wait(60)
            return search_logits(model, src, tgt)

    with ThreadPoolExecutor(1) as other:
        theirs = other.submit(hold)
        assert opened.wait(60)
        assert not no_hooks(model)  # the other thread's edit is on the model now
        close(search_logits(model, src, tgt), plain.logits)
        close(trace(model, src, tgt).logits, plain.logits)
        finish.set()
        close(theirs.result(), forced.logits)
    assert no_hooks(model)
