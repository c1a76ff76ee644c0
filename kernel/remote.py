"""The kernel's record of remote members: workers on other machines that joined a service's pool over tcp.

The supervisor has no slot for them (it did not start them and cannot restart them), so this registry is what
``status`` shows: REMOTE while the broker routes to one, LOST once it is dropped (heartbeats missed, said
goodbye, or its job deadline overrun: the broker's lost-worker path, which fails its jobs at once). A LOST
entry stays for the operator to see until the same name joins again; only the latest :data:`KEEP_LOST` are
kept, since every restart of a remote worker has a new name.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("foldermind.remote")

REMOTE = "REMOTE"
LOST = "LOST"
KEEP_LOST = 32
NAME_MAX = 120


@dataclass(slots=True)
class Member:
    name: str
    service: str
    pid: int
    key: str
    state: str = REMOTE
    joined: float = 0.0  # monotonic
    last_error: str | None = None


class RemoteMembers:
    """Implements the broker's :class:`~foldermind.kernel.bus.membership.RemoteMembership`."""

    def __init__(self, services: set[str], local_names: set[str], allowed: Callable[[], set[str]]) -> None:
        self.services = services
        self.local_names = local_names
        self.allowed = allowed
        self.members: OrderedDict[str, Member] = OrderedDict()

    def admit(self, name: str, service: str, pid: int, key: str) -> str | None:
        # Its connection passed the ZAP handler, but the key may have been denied since (the connection
        # outlives the entry: see Broker.dismiss_keys).
        if key not in self.allowed():
            return "its key is no longer allowed"
        if service not in self.services:
            return f"no service {service!r} in this kernel's process map"
        # The name is the worker's own (SERVICE@HOST:PID): it must not pass for a local slot.
        if not name.startswith(f"{service}@") or len(name) > NAME_MAX or not name.isprintable():
            return "a remote member's name must be SERVICE@HOST:PID"
        if name in self.local_names:
            return "that name is a local slot's"
        self.members.pop(name, None)
        self.members[name] = Member(name, service, pid, key, joined=time.monotonic())
        log.info("remote member %s joined service %s (key %s)", name, service, key)
        return None

    def lost(self, name: str, reason: str) -> None:
        member = self.members.get(name)
        if member is None or member.state == LOST:
            return
        member.state, member.last_error = LOST, reason
        log.warning("remote member %s lost: %s (the kernel cannot restart it)", name, reason)
        lost = [n for n, m in self.members.items() if m.state == LOST]
        for old in lost[: max(0, len(lost) - KEEP_LOST)]:
            del self.members[old]
