"""A worker slot's states and the changes between them that are legal (supervisord's ``states.py`` idea).

The supervisor (:mod:`foldermind.kernel.supervisor`) makes every change through one method that checks it
against :data:`TRANSITIONS`, so a change not listed here is a bug and says so loudly; the test of the policy
walks the same table. ``IDLE`` is foldermind's own: an on-demand worker with no process until a request
needs it.
"""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"
    STOPPING = "STOPPING"
    EXITED = "EXITED"
    FAILED = "FAILED"
    IDLE = "IDLE"


IDLE_NOTE = "on demand: starts with the first request for it"
"""What status says of an IDLE slot (it has no process to send a note of its own)."""


TRANSITIONS: dict[State, frozenset[State]] = {
    # start_all, `foldermind restart`, `worker run` waiting for its process; start_all of an on-demand slot
    State.EXITED: frozenset({State.STARTING, State.IDLE}),
    # READY; a `worker run` handover; killed or exited before READY; the `worker run` copy ended (respawn)
    State.STARTING: frozenset(State) - {State.IDLE},
    # stopped or restarted; exited (then backoff, the restart limit, or rest by policy); handed to `worker run`
    State.RUNNING: frozenset({State.STARTING, State.STOPPING, State.BACKOFF, State.FAILED, State.EXITED}),
    # the backoff ran out, or a restart / `worker run` came first; stopped while waiting
    State.BACKOFF: frozenset({State.STARTING, State.EXITED}),
    # asked again (restart while stopping); gone: respawn, hand to `worker run`, rest, or idle (on demand)
    State.STOPPING: frozenset({State.STOPPING, State.STARTING, State.EXITED, State.IDLE}),
    # only `foldermind restart` (or `worker run`) brings it back; stopped
    State.FAILED: frozenset({State.STARTING, State.EXITED}),
    # a request for its service, `foldermind restart` or `worker run`; stopped
    State.IDLE: frozenset({State.STARTING, State.EXITED}),
}
"""The legal state changes of a slot (supervisord's idea: a change not listed is a bug, and says so loudly).
A slot is never RUNNING without having been STARTING, never BACKOFF or FAILED without a process that
exited, never STOPPING without a process to stop, and IDLE only at start or after a worker it let go idle."""


class IllegalTransition(RuntimeError):
    """The supervisor tried a state change :data:`TRANSITIONS` does not allow: a bug in the supervisor."""
