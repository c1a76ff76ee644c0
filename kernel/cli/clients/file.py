"""A client's config file as foldermind touches it: read our entry, put it in, take it out, write the
result safely.

Only our member of the client's servers object (and, for VS Code's URL form, our item of ``inputs``) is
ever changed; :mod:`.jsonedit` keeps the rest of the text as it was. A write keeps a copy of the file as
it was before (``<file>.foldermind.bak``) and replaces the file atomically, with its permission bits.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from json5.model import JSONArray, JSONObject

from foldermind.kernel.cli.clients import jsonedit
from foldermind.kernel.cli.clients.entries import SERVER_NAME
from foldermind.kernel.cli.clients.facts import VSCODE_INPUT_ID, Client
from foldermind.kernel.cli.clients.jsonedit import Document, JsonError
from foldermind.protocol.runtime.home import fsync_path

BACKUP_SUFFIX = ".foldermind.bak"


def read(path: Path) -> str:
    """The file's text; a missing file reads as empty. Kept exactly (no newline translation)."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def parse(text: str, client: Client) -> Document | None:
    """The parsed file, or None when it is empty (a file we may write from scratch)."""
    return Document(text, client.jsonc) if text.strip() else None


def _servers(doc: Document, client: Client) -> JSONObject | None:
    node = doc.member(doc.root, client.servers_key)
    if node is not None and not isinstance(node, JSONObject):
        line, col = doc.line_col(doc.offset(node.lineno, node.col_offset))
        raise JsonError(f'"{client.servers_key}" is not an object', line, col)
    return node


def _our_slot(doc: Document, box: jsonedit.Container) -> jsonedit.Slot | None:
    """Our member of the servers object; two of them are refused (which one would the client use?)."""
    ours = [s for s in box.slots if s.name == SERVER_NAME]
    if len(ours) > 1:
        raise JsonError(f'"{SERVER_NAME}" appears {len(ours)} times; keep one by hand', *doc.line_col(ours[1].start))
    return ours[0] if ours else None


def current(text: str, client: Client) -> Any | None:
    """Our entry as the file holds it, or None. Raises JsonError like an edit would."""
    doc = parse(text, client)
    if doc is None:
        return None
    servers = _servers(doc, client)
    if servers is None:
        return None
    slot = _our_slot(doc, doc.container(servers))
    return None if slot is None else slot.value(text)


def with_entry(text: str, client: Client, entry: dict[str, Any], input_item: dict[str, Any] | None) -> str:
    """The text with our entry set (and VS Code's input), other bytes unchanged; equal text when it was
    already so (idempotent)."""
    doc = parse(text, client)
    if doc is None:
        body: dict[str, Any] = {client.servers_key: {SERVER_NAME: entry}}
        if input_item is not None:
            body["inputs"] = [input_item]
        return jsonedit.render(body, "", "  ") + "\n"
    unit = jsonedit.unit_indent(doc)
    servers = _servers(doc, client)
    if servers is None:
        text = jsonedit.insert(
            doc, doc.container(doc.root), jsonedit.member_text(client.servers_key, {SERVER_NAME: entry}, unit), unit
        )
    else:
        box = doc.container(servers)
        slot = _our_slot(doc, box)
        if slot is None:
            text = jsonedit.insert(doc, box, jsonedit.member_text(SERVER_NAME, entry, unit), unit)
        elif slot.value(text) != entry:
            text = jsonedit.replace(doc, slot, entry, unit)
    return text if input_item is None else _with_input(text, client, input_item, unit)


def _inputs(doc: Document) -> JSONArray | None:
    node = doc.member(doc.root, "inputs")
    if node is not None and not isinstance(node, JSONArray):
        line, col = doc.line_col(doc.offset(node.lineno, node.col_offset))
        raise JsonError('"inputs" is not an array', line, col)
    return node


def _our_input(doc: Document, box: jsonedit.Container) -> int | None:
    for i, slot in enumerate(box.slots):
        value = slot.value(doc.text)
        if isinstance(value, dict) and value.get("id") == VSCODE_INPUT_ID:
            return i
    return None


def _with_input(text: str, client: Client, item: dict[str, Any], unit: str) -> str:
    doc = Document(text, client.jsonc)
    inputs = _inputs(doc)
    if inputs is None:
        return jsonedit.insert(doc, doc.container(doc.root), jsonedit.member_text("inputs", [item], unit), unit)
    box = doc.container(inputs)
    index = _our_input(doc, box)
    if index is None:
        return jsonedit.insert(doc, box, jsonedit.render(item, "", unit), unit)
    if box.slots[index].value(text) != item:
        return jsonedit.replace(doc, box.slots[index], item, unit)
    return text


def without_entry(text: str, client: Client) -> str:
    """The text without our entry (nor our VS Code input); equal text when neither is there."""
    doc = parse(text, client)
    if doc is None:
        return text
    servers = _servers(doc, client)
    if servers is not None:
        box = doc.container(servers)
        slot = _our_slot(doc, box)
        if slot is not None:
            text = jsonedit.remove(doc, box, box.slots.index(slot))
            doc = Document(text, client.jsonc)
    inputs = _inputs(doc)
    if inputs is not None:
        box = doc.container(inputs)
        index = _our_input(doc, box)
        if index is not None:
            text = jsonedit.remove(doc, box, index)
    return text


def write(path: Path, old: str, new: str, private: bool = False) -> Path | None:
    """Replace the file atomically with ``new``, first copying ``old`` beside it when the file existed.
    Returns the backup's path. The file keeps its permission bits (a config may be 0600), except that when
    ``private`` (it holds the token itself) other users lose theirs (the backup's too); a new one is 0600
    when ``private``, else 0644. A symlinked config (a dotfiles checkout) is written where the link points,
    so the link stays a link."""
    path = path.resolve() if path.is_symlink() else path
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    mode = 0o600 if private else 0o644
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode) & (0o700 if private else 0o7777)
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        _atomic(backup, old, mode)
    _atomic(path, new, mode)
    return backup


def readable_by_others(path: Path) -> int | None:
    """The file's permission bits when users other than its owner may read or write it, else None."""
    try:
        mode = stat.S_IMODE(path.resolve().stat().st_mode)
    except OSError:
        return None
    return mode if mode & 0o077 else None


def _atomic(path: Path, text: str, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # no half-written temporary file left beside the config
        raise
    fsync_path(path.parent)  # the rename too: a power cut after `config install` said done keeps the new file
