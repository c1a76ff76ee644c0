"""Folders that are foldermind's own (the home's config, data, logs and sockets, and the model cache) are
never a Smart Folder: indexing them would index the index itself, the logs it writes while indexing, and
model files no one searches. A folder inside one of them is refused too, and so is a folder that holds one,
unless the way down to it passes a hidden folder (``~`` holding ``~/.local/share/foldermind``): the watcher
never walks into hidden folders, so such a folder is indexed without them."""

from __future__ import annotations

import os
from pathlib import Path

from foldermind.protocol.runtime.home import Home, model_cache_dir


def own_folders(home: Home, model_cache: str = "") -> dict[str, str]:
    """What each of this instance's own folders is called, by its resolved path."""
    named = {
        "config folder": home.config_dir,
        "data folder": home.data_dir,
        "log folder": home.log_dir,
        "runtime folder": home.runtime_dir,
        "model cache": model_cache_dir(model_cache),
    }
    return {os.path.realpath(path): name for name, path in named.items()}


def refusal(path: str, own: dict[str, str]) -> str:
    """Why the resolved folder ``path`` may not be a Smart Folder ('' when it may)."""
    for folder, name in own.items():
        if path == folder:
            return f"{path} is foldermind's own {name}"
        if path.startswith(folder.rstrip("/") + "/"):
            return f"{path} is inside foldermind's own {name} {folder}"
        if folder.startswith(path.rstrip("/") + "/"):
            below = Path(os.path.relpath(folder, path)).parts
            if not any(part.startswith(".") for part in below):
                return (
                    f"{path} holds foldermind's own {name} {folder}: it would index its own files; "
                    "register the folders beside it instead"
                )
    return ""
