"""The parts of docs/protocol.md that are rendered from the declarations, so they cannot drift.

A generated part sits between ``<!-- generated: NAME [ARG] -->`` and ``<!-- end generated -->``;
everything outside the markers is written by hand. ``errors`` is the error catalogue
(:class:`~foldermind.protocol.errors.ErrorCode`); ``fields KIND`` is the field table of one message kind:
each field's name, wire type, default and meaning, the meaning being the docstring under the field in
its dataclass (circus's rule: the declaration is the spec). ``python -m foldermind.protocol.reference
docs/protocol.md --with tests.faultworker`` rewrites the parts in place (``make docs``); with ``--check``
it only says whether they are current (a test runs that).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import itertools
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from foldermind.protocol.errors import ErrorCode, Fault
from foldermind.protocol.messages import REGISTRY, Message


def error_catalogue() -> str:
    """The table of every error code, then the faults."""
    rows = [
        "| code | produced by | fault | retryable | an MCP client sees | meaning |",
        "|---|---|---|---|---|---|",
    ]
    for code in ErrorCode:
        retry = "yes" if code.retryable else "no"
        rows.append(f"| `{code}` | {code.source} | `{code.fault}` | {retry} | `{code.mcp}` | {code.meaning} |")
    faults = [f"- `{fault}`: {fault.meaning}" for fault in Fault]
    intro = "The faults, which is what a caller decides on (wait, retry once, give up):"
    return "\n".join([*rows, "", intro, "", *faults])


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of ``cls`` (the string literal right after its annotation)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def wire_type(hint: str) -> str:
    """A field's annotation as the wire sees it: ``str | None`` is ``str or null``, a TypedDict a ``map``."""
    hint = hint.replace(" ", "")
    if hint.endswith("|None"):
        return wire_type(hint.removesuffix("|None")) + " or null"
    generic = re.fullmatch(r"(list|dict)\[(.*)\]", hint)
    if generic and generic.group(1) == "list":
        return f"list[{wire_type(generic.group(2))}]"
    if generic:
        key, value = generic.group(2).split(",", 1)
        return "map" if value == "Any" else f"dict[{wire_type(key)}, {wire_type(value)}]"
    if hint in ("str", "int", "float", "bool", "bytes"):
        return hint
    if hint.startswith("Literal[") or hint == "Status":
        return "str"
    return "map"  # a TypedDict: its keys are described under the kind


def wire_default(spec: dataclasses.Field[Any]) -> str:
    if spec.default is not dataclasses.MISSING:
        value = spec.default
        return f'`b"{value.decode()}"`' if isinstance(value, bytes) else f"`{json.dumps(value)}`"
    if spec.default_factory is not dataclasses.MISSING:
        return f"`{json.dumps(spec.default_factory())}`"
    return "required"


def field_table(kind: str) -> str:
    """The field table of ``kind``: name, wire type, default and the field's docstring."""
    cls: type[Message] = REGISTRY[kind]
    docs = field_docs(cls)
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        meaning = docs.get(spec.name, "")
        rows.append(f"| `{spec.name}` | {wire_type(str(spec.type))} | {wire_default(spec)} | {meaning} |")
    return "\n".join(rows)


def served_by(module: str) -> str:
    """The ``SERVED_BY`` of ``module``, else of the package it is in (the indexer's kinds are a package)."""
    while module:
        served = getattr(sys.modules.get(module), "SERVED_BY", "")
        if served:
            return str(served)
        module = module.rpartition(".")[0]
    return ""


def services() -> str:
    """Who serves what: each module of :mod:`foldermind.protocol.messages` (in name order), its ``SERVED_BY`` and its
    kinds."""
    by_module: dict[str, list[str]] = {}
    for kind, cls in REGISTRY.items():
        by_module.setdefault(cls.__module__, []).append(kind)
    rows = ["| module | served by | requests (each answered by its `.reply`) | other kinds |", "|---|---|---|---|"]
    for module, kinds in sorted(by_module.items()):
        served = served_by(module)
        requests = ", ".join(f"`{k}`" for k in kinds if k.endswith(".request"))
        others = ", ".join(f"`{k}`" for k in kinds if not k.endswith((".request", ".reply")))
        rows.append(f"| `{module.removeprefix('foldermind.protocol.messages.')}` | {served} | {requests} | {others} |")
    return "\n".join(rows)


def section(name: str, arg: str) -> str:
    if name == "errors" and not arg:
        return error_catalogue()
    if name == "services" and not arg:
        return services()
    if name == "fields" and arg in REGISTRY:
        return field_table(arg)
    raise KeyError(f"no generated section {name!r} {arg!r}")


_BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[a-z-]+)(?: (?P<arg>[a-z_.]+))? -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S
)


def render(text: str) -> str:
    """``text`` with every generated part rendered afresh."""

    def fill(match: re.Match[str]) -> str:
        body = section(match.group("name"), match.group("arg") or "")
        return f"{match.group(1)}\n{body}\n\n{match.group(5)}"

    return _BLOCK.sub(fill, text)


def generated(text: str) -> list[str]:
    """The generated parts ``text`` has, as ``NAME`` or ``NAME ARG``."""
    return [" ".join(filter(None, (m.group("name"), m.group("arg")))) for m in _BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="the Markdown file (docs/protocol.md)")
    parser.add_argument("--check", action="store_true", help="only say whether the generated parts are current")
    parser.add_argument(
        "--with",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, for kinds declared outside the package (tests.faultworker's fault.*)",
    )
    args = parser.parse_args(argv)
    for module in args.modules:
        importlib.import_module(module)
    text = args.path.read_text(encoding="utf-8")
    fresh = render(text)
    if args.check:
        if fresh != text:
            print(f"{args.path}: generated parts are stale; run make docs")
            return 1
        return 0
    args.path.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
