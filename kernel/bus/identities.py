"""How the broker tells its peers apart: the constants of the bus, kept apart as the ZeroMQ Guide's MDP.py.

Each worker has two DEALER sockets on the bus: its job socket, and its heartbeat socket, whose identity is the
job socket's plus :data:`HB_SUFFIX`, so a busy job thread never delays a heartbeat. Workers on other machines
reach the kernel over a second ROUTER, the CURVE-only tcp socket (:mod:`foldermind.kernel.curve`): their
identities get :data:`REMOTE_PREFIX`, so both sockets share one table of peers and jobs and a reply always
leaves by the socket its peer came in on.
"""

from __future__ import annotations

HB_SUFFIX = b"/hb"
"""Appended to a worker's job-socket identity to name its heartbeat socket."""
REMOTE_PREFIX = b"\x00tcp/"
"""Prepended to the identity of every peer on the tcp socket. ZeroMQ reserves identities that start with a zero
byte (it makes up 5-byte ones itself), so no ipc peer can pass for a remote one; one that tries is refused."""
