"""What the Clients page asks for: each client's entries, ``doctor``'s findings, ``config install`` with its diff
first, a test connection, and the token's rotation.

The client formats, ``doctor`` and ``config install`` live in the command line, which no worker imports: the kernel
runs the command a user would type and answers with what it printed (``ctl.cli``, :mod:`foldermind.kernel.errands`),
so the page and the terminal can never disagree. The rotation is the front door's own (``mcp.token.rotate``, as
``foldermind token rotate`` asks it). Nothing here logs a snippet or the token.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import CliReply, CliRequest, TokenRotateReply, TokenRotateRequest
from foldermind.workers.framework.asyncbus import Bus

CLI_TIMEOUT_S = 200.0
"""Longer than the kernel lets a command run (kernel/errands.py), so its own answer comes first."""


async def run(bus: Bus, task: str, client: str = "", folders: list[str] | None = None) -> CliReply | str:
    """The command's reply, or why the kernel could not run it."""
    try:
        return await bus.call("kernel", CliRequest(task, client, folders or []), CliReply, timeout=CLI_TIMEOUT_S)
    except JobError as exc:
        return exc.message


def failed(reply: CliReply) -> str:
    """The command's last line of error (click's ``Error: ...``), as a person reads it."""
    lines = [line.removeprefix("Error: ") for line in reply.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"the command exited {reply.exit_code}"


@dataclass(slots=True)
class Setup:
    snippets: list[dict[str, Any]] = field(default_factory=list)
    """``config snippet --json``: one item per client and form."""
    checks: list[dict[str, Any]] = field(default_factory=list)
    """``doctor --json``'s checks: name, status, detail, fix."""
    problems: list[str] = field(default_factory=list)

    def clients(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """The snippets by client, in the command line's order: (client name, its forms)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for item in self.snippets:
            out.setdefault(item["client"], []).append(item)
        return list(out.items())


async def snippets(bus: Bus, setup: Setup) -> None:
    reply = await run(bus, "snippets")
    if isinstance(reply, str) or reply.exit_code != 0:
        setup.problems.append(f"no snippets: {reply if isinstance(reply, str) else failed(reply)}")
        return
    setup.snippets = list(json.loads(reply.stdout))


async def doctor(bus: Bus, setup: Setup) -> None:
    reply = await run(bus, "doctor")
    if isinstance(reply, str):
        setup.problems.append(f"doctor did not run: {reply}")
        return
    try:  # exit status 1 when a check failed: the findings are whole all the same
        setup.checks = list(json.loads(reply.stdout)["checks"])
    except (ValueError, KeyError, TypeError):
        setup.problems.append(f"doctor did not run: {failed(reply)}")


@dataclass(slots=True)
class Change:
    """``config install``'s change to one client's file, shown before it is made."""

    client: str
    diff: str = ""
    """The unified diff (empty: the file already holds the entry)."""
    said: list[str] = field(default_factory=list)
    """What the command said besides: the file, notes, or the result when it wrote."""
    error: str = ""

    @property
    def digest(self) -> str:
        """Names the diff shown, so a confirmation installs only the change that was seen."""
        return hashlib.sha256(self.diff.encode()).hexdigest()[:32]

    def lines(self) -> list[tuple[str, str]]:
        """The diff's lines with their kind (``add``, ``del``, ``head`` or ``same``), for the page's colours."""
        kinds = {"+++": "head", "---": "head", "@@": "head", "+": "add", "-": "del"}
        return [
            (next((k for p, k in kinds.items() if line.startswith(p)), "same"), line) for line in self.diff.splitlines()
        ]


async def install(bus: Bus, client: str, write: bool) -> Change:
    """``config install --client CLIENT`` with ``--dry-run`` (the diff), or for real (``write``)."""
    out = Change(client)
    reply = await run(bus, "install" if write else "install-preview", client)
    if isinstance(reply, str):
        out.error = reply
        return out
    if reply.exit_code != 0:
        out.error = failed(reply)
        return out
    said = [line for line in (reply.stdout + reply.stderr).splitlines() if line.strip()]
    if write or "nothing to change" in reply.stdout:
        out.said = said
    else:
        out.diff = reply.stdout
        out.said = [line for line in reply.stderr.splitlines() if line.strip()]
    return out


async def test_connection(bus: Bus) -> tuple[bool, list[str]]:
    """A real MCP tools/list round trip through the front door (``foldermind test-connection``): whether it worked,
    and what the command said."""
    reply = await run(bus, "test-connection")
    if isinstance(reply, str):
        return False, [reply]
    if reply.exit_code != 0:
        return False, [failed(reply)]
    return True, [line.strip() for line in reply.stdout.splitlines() if line.strip()]


async def rotate(bus: Bus) -> str:
    """A new owner's token from the front door, in use at once; "" when done, else why not (the old one stays)."""
    try:
        await bus.call("frontdoor", TokenRotateRequest(), TokenRotateReply)
    except JobError as exc:
        return f"the token was not rotated, the old one still works: {exc.message}"
    return ""
