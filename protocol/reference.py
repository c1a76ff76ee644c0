"""The parts of docs/protocol.md that are rendered from the declarations, so they cannot drift.

A generated part sits between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``; everything
outside the markers is written by hand. ``python -m foldermind.protocol.reference docs/protocol.md``
rewrites the parts in place; with ``--check`` it only says whether they are current (a test runs that).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from foldermind.protocol.errors import ErrorCode, Fault


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


SECTIONS: dict[str, Callable[[], str]] = {"errors": error_catalogue}

_BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def render(text: str) -> str:
    """``text`` with every generated part rendered afresh."""

    def fill(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in SECTIONS:
            raise KeyError(f"no generated section named {name!r}")
        return f"{match.group(1)}\n{SECTIONS[name]()}\n\n{match.group(4)}"

    return _BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("path", type=Path, help="the Markdown file (docs/protocol.md)")
    parser.add_argument("--check", action="store_true", help="only say whether the generated parts are current")
    args = parser.parse_args(argv)
    text = args.path.read_text(encoding="utf-8")
    fresh = render(text)
    if args.check:
        if fresh != text:
            print(f"{args.path}: generated parts are stale; run python -m foldermind.protocol.reference {args.path}")
            return 1
        return 0
    args.path.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
