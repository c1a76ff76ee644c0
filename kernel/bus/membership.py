"""What the broker asks of the kernel outside it: the supervisor, and the registry of remote members.

The broker decides nothing about processes. It asks the supervisor whether a READY comes from a slot it runs,
tells it when a worker is gone (and whether to kill it), asks whether a name can still be served, asks for an
on-demand worker when a job waits, and lets an idle one go. It asks the registry of remote members
(:mod:`foldermind.kernel.remote`) whether a READY from a tcp peer may join, and tells it when one is lost.
"""

from __future__ import annotations

from typing import Protocol


class Membership(Protocol):
    """What the broker asks of the supervisor."""

    def accept_ready(self, name: str, service: str, pid: int) -> bool: ...

    def worker_gone(self, name: str, pid: int, reason: str, kill: bool) -> None: ...

    def may_serve(self, target: str) -> bool: ...

    def demand(self, target: str) -> None:
        """A job for ``target`` is queued with no free worker: start an on-demand one if there is one to start."""
        ...

    def went_idle(self, name: str, pid: int) -> bool:
        """An on-demand worker with nothing in hand asks to go; True: let it."""
        ...


class RemoteMembership(Protocol):
    """What the broker asks of the kernel's registry of remote members (:mod:`foldermind.kernel.remote`)."""

    def admit(self, name: str, service: str, pid: int, key: str) -> str | None:
        """None if a READY from a tcp peer admitted under ``key`` may join; else why not."""
        ...

    def lost(self, name: str, reason: str) -> None: ...
