"""``supervisor.toml`` rendered from :mod:`foldermind.protocol.runtime.config`: every key with its default and its
help as a comment (beside it when both fit on a line, else above it), table by table in declaration order.

The rendering is the file users read to learn the knobs, and it is committed at the top of the repository
(shipped as ``foldermind/protocol/runtime/supervisor.toml``); ``tests/test_config.py`` fails when the committed file is
not the current rendering. After changing a default or its help: ``foldermind config defaults >
supervisor.toml``.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from pydantic import BaseModel

from foldermind.protocol.runtime.config import PROCESS_MAP, WORKER_HELP, SupervisorConfig, WorkerSpec

WIDTH = 120

HEADER = """\
# foldermind supervisor policy: every setting the kernel and its workers apply, with its default and what it does.
# Generated from protocol/runtime/config/ (`foldermind config defaults`): edit the declarations there, not this file.
# A home overrides only the keys it names, in <home>/config/supervisor.toml; an unknown key is an error, so a typo
# never silently does nothing. The measurements behind the defaults: docs/tuning.md.
"""


def value(v: Any) -> str:
    """``v`` as a TOML value (the config holds only booleans, numbers, strings and flat lists/tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def comment(text: str, first: str = "# ", rest: str = "# ") -> list[str]:
    return textwrap.wrap(text, WIDTH - 2, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def table(name: str, model: BaseModel) -> list[str]:
    lines = [*comment(type(model).__doc__ or ""), f"[{name}]"]
    for key, field in type(model).model_fields.items():
        lines += setting(f"{key} = {value(getattr(model, key))}", field.description or "")
    return lines


def setting(line: str, text: str) -> list[str]:
    """A key's line under its help, or with the help as a trailing comment when both fit on one line."""
    if len(f"{line}  # {text}") <= WIDTH:
        return [f"{line}  # {text}"]
    return [*comment(text), line]


def worker(name: str, spec: WorkerSpec) -> list[str]:
    lines = [*comment(WORKER_HELP.get(name, "")), f"[workers.{name}]"]
    default = WorkerSpec(module=spec.module)
    for key in type(spec).model_fields:
        v = getattr(spec, key)
        if key == "module" or v != getattr(default, key):
            lines.append(f"{key} = {value(v)}")
    return lines


def render() -> str:
    """The annotated ``supervisor.toml`` of the declared defaults."""
    config = SupervisorConfig()
    blocks = [HEADER.rstrip("\n").split("\n")]
    for name in type(config).model_fields:
        if name != "workers":
            blocks.append(table(name, getattr(config, name)))
    workers_help = type(config).model_fields["workers"].description or ""
    keys = ["# Keys of a worker:"]
    for key, field in WorkerSpec.model_fields.items():
        keys += comment(f"{key}: {field.description}", "#   ", "#     ")
    blocks.append(comment(workers_help) + keys)
    blocks += [worker(name, spec) for name, spec in PROCESS_MAP.items()]
    return "\n\n".join("\n".join(b) for b in blocks) + "\n"
