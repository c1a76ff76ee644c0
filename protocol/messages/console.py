"""The web console's own kinds (CLI -> console)."""

from __future__ import annotations

from dataclasses import dataclass

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the web console"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


@message("console.link.request")
@dataclass(slots=True)
class ConsoleLinkRequest(Message):
    """-> console: a new one-time sign-in link (``foldermind console``). The link signs one browser in: it works
    once, within ``[console] link_ttl_s``, and sets a session cookie; the code in it is the only secret and it
    never reaches a log."""


@message("console.link.reply")
@dataclass(slots=True)
class ConsoleLinkReply(Message):
    """The sign-in link and the console's own URL."""

    link: str
    """`http://127.0.0.1:PORT/signin?code=...`: opens the console signed in, once."""
    url: str
    """The console's URL, `http://127.0.0.1:PORT/` (without a session it shows how to sign in)."""
    expires_s: float
    """Seconds the link stays valid."""
