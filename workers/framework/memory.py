"""A worker's memory around large models: the cyclic GC paused while a model loads, freed heap handed back to
the system, and how often an idle model's unloader looks. Shared by the embedder, the query encoder, the parser
and the llm worker."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Iterator

from foldermind.workers.framework.heartbeat import model_loads


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC paused around loading a model (torch and sentence-transformers here, the llm's GGUF
    conversion and load), and everything the load created frozen after.

    A load creates millions of objects, and each full GC pass over them holds the GIL for up to a second
    on an idle core (several on a busy machine): long enough to starve the worker's heartbeat thread past
    the kernel's liveness (3 s), which then kills the worker as hung, again at every restart (seen in the
    load bench under CPU contention, docs/reliability-load.md). Frozen (``gc.freeze``), those objects are
    never traversed again by later full passes either; the few cycles the load left as garbage stay, once."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with model_loads.loading():  # and what GC cannot help (native code holding the GIL) is allowed for
            yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def return_memory() -> None:
    """Collect what the model left behind and hand freed heap pages back to the system.

    The load's objects were frozen out of the collector (:func:`gc_paused`); unfrozen now, the
    ones the model held are garbage. glibc keeps freed heap memory for reuse unless asked to trim it,
    and RSS is what ``status`` and the user's task manager show."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()  # what is left is the worker's own long-lived state: keep later passes off it again
    trim_heap()


def trim_heap() -> None:
    """Hand the heap's free pages back to the system (glibc keeps freed memory for reuse unless asked; RSS is
    what ``status`` and the user's task manager show). A no-op elsewhere."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)


def idle_check_every(idle_s: float) -> float:
    """How often a model's idle unloader looks: a quarter of the idle time (a model is freed at most 25%
    late), between 1 s and 60 s."""
    return max(1.0, min(60.0, idle_s / 4))
