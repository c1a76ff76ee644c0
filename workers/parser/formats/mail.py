"""Mail: one message (``.eml``) or a mailbox of them (``.mbox``), with stdlib email (``policy.default``).

Each message opens with its header block (Subject, From, To, Cc, Date, the attachments' names) as lines,
so a search for a sender, a date or an attachment's name finds it, then its body: text/plain preferred,
else its HTML made text by the HTML parser (:mod:`.html`). The message's heading path is its subject (in a
mailbox "Message N: subject", since replies share a subject and two messages must never share a chunk).
An attachment whose name says a format this parser reads is parsed by that format's parser and added
under "<subject> > <file name>" (its own headings and pages kept), so a hit in an attached DOCX names
the message and the part; an attachment that fails to parse is left out (its name stays in the header
block) and the rest of the message is kept. An attached message (message/rfc822) is read as a message
nested under its parent's heading, at most :data:`MAX_DEPTH` deep.

A mailbox is split at its ``From `` lines and read one message at a time (the parsed message is dropped
before the next is read), so memory follows one message, not the mailbox; at most :data:`MAX_MESSAGES`
messages are read, beyond that the file is refused as ``file_too_large``: the limit keeps a mailbox inside the
60 s parse timeout with room for larger messages (measured: docs/tuning.md#parser-bounds).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from foldermind.protocol.errors import ErrorCode
from foldermind.workers.parser.formats.document import Builder, ParsedDocument, ParseError, add_fields, one_line

log = logging.getLogger("foldermind.parser")

FORMAT = "email"
SUFFIXES = (".eml", ".mbox")
MAX_MESSAGES = 10_000
"""Messages read from one mailbox; a larger one is refused as too large."""
MAX_DEPTH = 5
"""How deep attached messages (a forward of a forward ...) are opened."""
NO_SUBJECT = "(no subject)"
_FROM_LINE = re.compile(rb"^From ", re.MULTILINE)
"""A mailbox's message separator (mboxo/mboxrd: a body line that starts so is written ``>From ``)."""


def too_many_messages(limit: int = MAX_MESSAGES) -> str:
    return f"mailbox too large: more than {limit} messages (the limit)"


def parse(data: bytes, max_bytes: int) -> ParsedDocument:
    spans = _message_spans(data)
    builder = Builder()
    if len(spans) == 1:
        start, end = spans[0]
        message = _read(data[start:end])
        subject = _header(message, "subject") or NO_SUBJECT
        _message(builder, message, subject, max_bytes, 0)
        return ParsedDocument(FORMAT, builder.segments(), title=subject)
    if len(spans) > MAX_MESSAGES:
        raise ParseError(ErrorCode.FILE_TOO_LARGE, too_many_messages())
    for number, (start, end) in enumerate(spans, 1):
        message = _read(data[start:end])
        subject = _header(message, "subject") or NO_SUBJECT
        _message(builder, message, f"Message {number}: {subject}", max_bytes, 0)
    return ParsedDocument(FORMAT, builder.segments())


def _message_spans(data: bytes) -> list[tuple[int, int]]:
    """Where each message is (without its ``From `` line): one per ``From `` line that starts a line of a
    mailbox, or the whole file for one message. Counting stops past :data:`MAX_MESSAGES`."""
    if not data.startswith(b"From "):
        return [(0, len(data))]
    lines = [m.start() for m in _FROM_LINE.finditer(data)][: MAX_MESSAGES + 1]
    spans: list[tuple[int, int]] = []
    for n, at in enumerate(lines):
        end_of_line = data.find(b"\n", at)
        start = len(data) if end_of_line < 0 else end_of_line + 1
        spans.append((start, lines[n + 1] if n + 1 < len(lines) else len(data)))
    return spans


def _read(raw: bytes) -> EmailMessage:
    from email import policy
    from email.parser import BytesParser

    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)  # what policy.default makes
    return message


def _header(message: EmailMessage, name: str) -> str:
    """A header's decoded value on one line ("" when absent); a header too malformed to decode is given raw."""
    try:
        value = message.get(name)
    except Exception:  # the header parser chokes on a hostile header: its raw text still says something
        value = next((v for k, v in message.raw_items() if k.lower() == name), None)
    return one_line(str(value)) if value is not None else ""


def _message(builder: Builder, message: EmailMessage, heading: str, max_bytes: int, depth: int) -> None:
    attachments = list(_attachments(message))
    names = [name for name, _ in attachments if name]
    builder.blank()
    add_fields(
        builder,
        [
            ("Subject", _header(message, "subject")),
            ("From", _header(message, "from")),
            ("To", _header(message, "to")),
            ("Cc", _header(message, "cc")),
            ("Date", _header(message, "date")),
            ("Attachments", ", ".join(names)),
        ],
        heading=heading,
    )
    _body(builder, message, heading)
    for name, part in attachments:
        if part.get_content_type() == "message/rfc822":
            _attached_message(builder, part, heading, max_bytes, depth)
        elif name:
            _attachment(builder, name, part, f"{heading} > {one_line(name)}", max_bytes)


def _attachments(message: EmailMessage) -> Iterator[tuple[str, EmailMessage]]:
    try:
        parts = list(message.iter_attachments())
    except Exception:  # a broken MIME structure: the body is still read
        return
    for part in parts:
        assert isinstance(part, EmailMessage)
        try:
            name = part.get_filename() or ""
        except Exception:
            name = ""
        yield name, part


def _body(builder: Builder, message: EmailMessage, heading: str) -> None:
    try:
        body = message.get_body(preferencelist=("plain", "html"))
    except Exception:
        body = None
    if body is None:
        return
    assert isinstance(body, EmailMessage)
    if body.get_content_type() == "text/html":
        from foldermind.workers.parser.formats.html import parse_html

        try:
            page = parse_html(_payload(body))
        except ParseError:
            return
        for seg in page.segments:
            builder.add(seg.text, heading=_under(heading, seg.heading))
        return
    text = _text(body)
    if text.strip():
        builder.add("\n".join(line.rstrip() for line in text.strip("\n").split("\n")), heading=heading)


def _attached_message(builder: Builder, part: EmailMessage, heading: str, max_bytes: int, depth: int) -> None:
    if depth >= MAX_DEPTH:
        return
    try:
        inner: Any = part.get_content()
    except Exception:
        return
    if isinstance(inner, EmailMessage):
        subject = _header(inner, "subject") or NO_SUBJECT
        _message(builder, inner, f"{heading} > {subject}", max_bytes, depth + 1)


def _attachment(builder: Builder, name: str, part: EmailMessage, heading: str, max_bytes: int) -> None:
    # Imported here: the registry imports this module, and an attachment may be of any format it knows.
    from foldermind.workers.parser import formats

    fmt = formats.format_of(Path(name))  # only its suffix counts
    if fmt is None:
        return
    try:
        doc = formats.PARSERS[fmt](_payload(part), max_bytes)
    except ParseError as exc:
        log.debug("an attachment (%s) was left out: %s", fmt, exc.code)
        return
    builder.blank()
    for seg in doc.segments:
        builder.add(seg.text, page=seg.page, heading=_under(heading, seg.heading))


def _under(heading: str, inner: str | None) -> str:
    return f"{heading} > {inner}" if inner else heading


def _payload(part: EmailMessage) -> bytes:
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _text(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except Exception:  # an unknown charset, a broken transfer encoding: the bytes as UTF-8, best effort
        content = _payload(part).decode("utf-8", "replace")
    return content if isinstance(content, str) else ""
