"""Forward hooks that fire in the thread that put them on the model, and in no other.

A model's modules are shared by every thread that holds the model: the explorer answers its page
in a server thread while a notebook translates with the same Model in its own. A lens, a trace
or an edit hooks the modules for the length of one call; a forward pass of another thread in
that time must see the model itself, not a shortened encoder or a swapped key."""

import threading
from collections.abc import Callable

from torch import nn
from torch.utils.hooks import RemovableHandle


def own_thread(hook: Callable) -> Callable:
    """`hook`, doing nothing (returning None: the module's input or output stays as it is) when
    called from any thread but this one."""
    owner = threading.get_ident()

    def guarded(*args, **kwargs):
        return hook(*args, **kwargs) if threading.get_ident() == owner else None

    return guarded


def after(module: nn.Module, hook: Callable) -> RemovableHandle:
    """module.register_forward_hook(hook), firing in this thread only."""
    return module.register_forward_hook(own_thread(hook))


def before(module: nn.Module, hook: Callable, with_kwargs: bool = False) -> RemovableHandle:
    """module.register_forward_pre_hook(hook), firing in this thread only."""
    return module.register_forward_pre_hook(own_thread(hook), with_kwargs=with_kwargs)
