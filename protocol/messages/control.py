"""The control API (CLI -> kernel, ``to="kernel"``) and the kernel's events (its PUB socket; the topic
frame is the kind)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = 'the kernel (`to = "kernel"`), which also publishes the `event.*` kinds'
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


class KernelInfo(TypedDict):
    pid: int
    uptime_s: float
    version: str
    rss_bytes: int
    tree_rss_bytes: int
    """The kernel and every process under it (workers and their children) together."""


class WorkerInfo(TypedDict):
    name: str
    service: str
    state: str
    pid: int | None
    uptime_s: float | None
    restarts: int
    in_flight: int
    last_error: str | None
    rss_bytes: int | None
    note: str
    remote: bool
    """A worker on another machine that joined over the tcp bus (state REMOTE or LOST; the kernel cannot
    restart it)."""
    key: str | None
    """A remote member's key, by its name on the allow list (`foldermind bus allow NAME KEY`); null locally."""
    past_error: str | None
    """The last error with its time once the worker has run healthy since (`last_error` is then null)."""
    error_at: float | None
    """When the last error (current or past) happened, seconds since the epoch."""


class McpInfo(TypedDict):
    url: str | None
    port: int | None
    state: str


def not_served() -> McpInfo:
    return McpInfo(url=None, port=None, state="disabled")


@message("ctl.status.request")
@dataclass(slots=True)
class StatusRequest(Message):
    """The whole process map, as ``foldermind status`` prints it."""


@message("ctl.status.reply")
@dataclass(slots=True)
class StatusReply(Message):
    """``kernel``, ``workers`` (name, service, state, pid, uptime_s, restarts, in_flight, last_error,
    rss_bytes, note, remote, key, past_error, error_at), ``mcp`` (url, port, state), ``folders``
    (per-folder progress) and ``console`` (url, port, state)."""

    kernel: KernelInfo
    """`{pid: int, uptime_s: float, version: str, rss_bytes: int, tree_rss_bytes: int}`: the kernel's own RSS
    and that of its whole process tree (workers and their children)."""
    workers: list[WorkerInfo]
    """One entry per slot, in `supervisor.toml` order (see below), then one per remote member (`remote: true`,
    state `REMOTE` or `LOST`, `key`: the allow-list name of its key; pid and rss are the remote process's own,
    rss unknown)."""
    mcp: McpInfo
    """`{url: str or null, port: int or null, state: str}`; today always `{null, null, "not_serving"}`."""
    folders: list[dict[str, Any]] = field(default_factory=list)
    """Per-folder progress; the kernel always sends `[]` (see below). A plain map here, not the indexer's
    `FolderInfo`: the CLI fills it with what `folders.list.reply` says, and the control kinds do not depend on
    the indexer's."""
    console: McpInfo = field(default_factory=not_served)
    """The web console's `{url, port, state}` as its worker wrote them once bound (`state` `disabled` when the map
    has no console, `starting` or `stopped` while its worker is not RUNNING)."""


@message("ctl.restart.request")
@dataclass(slots=True)
class RestartRequest(Message):
    """Restart one worker (``parser#2``) or a whole pool (``parser``), FAILED ones included.

    The others keep serving. Jobs held by a restarted worker fail with ``worker_lost``.
    """

    target: str
    """A worker name (`parser#2`) or a service/pool name (`parser`)."""


@message("ctl.restart.reply")
@dataclass(slots=True)
class RestartReply(Message):
    """The worker names being restarted."""

    restarted: list[str]
    """The names of the slots matched by `target` (this includes any slot handed to `worker run`, which is not actually
    restarted)."""


@message("ctl.stop.request")
@dataclass(slots=True)
class StopRequest(Message):
    """Stop every worker (SIGTERM, a grace period, then SIGKILL), then the kernel itself."""


@message("ctl.stop.reply")
@dataclass(slots=True)
class StopReply(Message):
    """Sent once every worker is gone: ``report`` maps worker name to how it ended
    (``exited 0``, ``killed by signal 9``, ``killed after 5 s grace``, ``was FAILED``, ...)."""

    report: dict[str, str]
    """Worker name to how it ended."""


@message("ctl.attach.request")
@dataclass(slots=True)
class AttachRequest(Message):
    """``foldermind worker run NAME``: stand the supervisor's copy of ``name`` down and accept a
    READY for that name from the foreground process ``pid`` instead. When that process goes away
    (disconnect or missed heartbeats) the supervisor starts its own copy again."""

    name: str
    """The worker name to take over (`parser#2`; a pool name is not accepted)."""
    pid: int
    """The pid of the foreground process that will send READY."""


@message("ctl.attach.reply")
@dataclass(slots=True)
class AttachReply(Message):
    """The worker was stood down; ``service`` is the service name the foreground copy must use."""

    name: str
    """The slot name."""
    service: str
    """The service name the foreground copy must announce in its READY."""


@message("ctl.cli.request")
@dataclass(slots=True)
class CliRequest(Message):
    """Run one of the command line's client-setup commands in a child process and answer with what it printed:
    how the web console shows and makes a client's setup, since the client formats, `doctor`'s checks and
    `config install` live in the command line, which no worker imports. Answered when the command ends."""

    task: str
    """`snippets` (`config snippet --json`: every client's entries), `doctor` (`doctor --json`), `install-preview`
    (`config install --client CLIENT --dry-run`: the diff), `install` (`config install --client CLIENT`),
    `test-connection` (a real MCP tools/list round trip through the front door), `keys` (`token list --json`),
    `key-add` (`token add CLIENT --folders FOLDERS --json`: its token is printed once) or `key-revoke` (`token
    revoke CLIENT`)."""
    client: str = ""
    """The client for `install-preview` and `install` (a `config install --client` name), or the key's name for
    `key-add` and `key-revoke`."""
    folders: list[str] = field(default_factory=list)
    """The Smart Folder ids a `key-add` key sees (at least one: the console makes scoped keys only)."""


@message("ctl.cli.reply")
@dataclass(slots=True)
class CliReply(Message):
    """The command's exit status and output, as a terminal would have shown them."""

    exit_code: int
    """0 when the command succeeded (`doctor` exits 1 when a check failed; its JSON is still whole)."""
    stdout: str
    """What it printed (JSON for `snippets` and `doctor`, the unified diff for `install-preview`)."""
    stderr: str
    """Its notes and errors (one line each)."""


# Events


@message("event.worker_state")
@dataclass(slots=True)
class WorkerStateEvent(Message):
    """A worker changed state (STARTING, RUNNING, BACKOFF, STOPPING, EXITED, FAILED, IDLE).

    ``reason`` says why (``spawned``, ``ready``, ``exited with status -9``, ``restart limit``...).
    """

    name: str
    """Slot name."""
    service: str
    """Service name."""
    old: str
    """Previous state."""
    new: str
    """New state (STARTING, RUNNING, BACKOFF, STOPPING, EXITED, FAILED)."""
    pid: int | None
    """The slot's pid after the change, `null` if none."""
    reason: str = ""
    """Why the state changed."""
