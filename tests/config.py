"""A test home's supervisor.toml as a dict: parts merged by :func:`merge`, written once by :func:`render`.

A part is a nested dict shaped like the file (``{"mcp": {"port": 0}}``, ``{"workers": {"llm": {"enabled":
False}}}``). Parts merge table by table: a later part's key wins, and tables named by several parts get every
part's keys, as one file writing each table once would (TOML itself forbids naming a table twice). Paths may be
given as :class:`~pathlib.Path`; they are written as strings. tests/helpers.py holds the parts most homes share
(``FAST_RESTART``, ``only_workers(...)``, ...) and writes a home's file with the shared model cache.

Tests of a broken or misspelled config file (tests/test_config.py, ...) write their text as it is: a dict
cannot hold what they test.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import tomli_w

Config = dict[str, Any]


def merge(*parts: Mapping[str, Any]) -> Config:
    """One config from ``parts``, left to right: tables merge key by key, a later value wins. No part is changed."""
    merged: Config = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Mapping):
                below = merged.get(key)
                merged[key] = merge(below, value) if isinstance(below, Mapping) else merge(value)
            else:
                merged[key] = value
    return merged


def render(config: Mapping[str, Any]) -> str:
    """``config`` as supervisor.toml text (tomli-w), paths written as strings."""
    return tomli_w.dumps(_plain(config))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    return value
