"""Which Smart Folder a person means by what they typed: one rule for the indexer (every request that names a
folder) and the command line (``folders show|retry|remove``, ``token add --folders``), so the two never differ.

A folder is named by its id, its registered path, or its name when no other folder has that name (``status`` and
``folders list`` show names, and people type what they see). The command line also knows the directory a relative
path names in its own working directory (``here``): ``folders remove docs`` run beside a ``docs/`` directory means
the folder named ``docs`` when one is, and that directory's folder otherwise; when the name and the directory are
two different folders, neither is taken and the refusal names both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Known:
    id: str
    name: str
    path: str
    """The registered path ("" for a criteria folder)."""


class NotOneFolder(LookupError):
    """No folder, or more than one, is named so; the message says which (without a hint of what to type)."""


def choose(folders: Sequence[Known], typed: str, here: str = "", sees: Callable[[str], bool] | None = None) -> int:
    """The index in ``folders`` of the folder ``typed`` names (see the module docstring); ``here``: the absolute,
    resolved path of the directory ``typed`` names where the command ran ("" when none); ``sees``: the folder ids a
    client key may see, the only ones names are looked up among (a refusal then says nothing of the others)."""
    for at, f in enumerate(folders):
        if typed == f.id or (f.path and typed.rstrip("/") in (f.path, f.path.rstrip("/"))):
            return at
    named = [at for at, f in enumerate(folders) if f.name == typed and (sees is None or sees(f.id))]
    there = next((at for at, f in enumerate(folders) if here and f.path == here), None)
    if len(named) > 1:
        raise NotOneFolder(f"{len(named)} Smart Folders are named {typed!r}: give its id or path")
    if named and there is not None and there != named[0]:
        a, b = folders[named[0]], folders[there]
        raise NotOneFolder(
            f"{typed!r} is the name of the Smart Folder {a.name} ({a.id}) and, here, the path of the Smart Folder"
            f" {b.name} ({b.id}): give its id"
        )
    if named:
        return named[0]
    if there is not None:
        return there
    raise NotOneFolder(f"no Smart Folder {typed!r}")


def here(typed: str) -> str:
    """For the command line: the directory ``typed`` names where it runs, resolved as the indexer registers a path
    ("" when it names none)."""
    return os.path.realpath(typed) if os.path.isdir(typed) else ""
