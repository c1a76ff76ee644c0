"""Which files of a Smart Folder are documents, and in which format: shared by the watcher (what it lists and
reports) and the indexer (what it asks a parser to read), so both decide alike.

- ``[ingest] exclude`` globs leave files and subfolders out: a glob is matched against the path inside the
  folder (``drafts/**``, ``build``), and a glob without a slash against each name on that path too (``*.log``,
  ``node_modules``), so an excluded folder's files are left out with it.
- A suffix a parser reads picks its format. A suffix of ``[ingest] extra_text_suffixes`` is read as plain text.
- A file with any other suffix (or none: README, NEWS, changelog, README.Debian) is read as plain text when its
  first bytes are text: no NUL byte, and decodable (UTF-8, else the encoding the text parser detects). Otherwise
  it is unsupported, counted by suffix. The bytes are read through :mod:`.userfiles`, as every user file is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath

from wcmatch import glob as wcglob

from foldermind.protocol.runtime.config import IngestPolicy
from foldermind.workers import userfiles
from foldermind.workers.parser.formats import SUFFIXES, ParseError, decode_text
from foldermind.workers.parser.formats.image import SUFFIXES as IMAGE_SUFFIXES
from foldermind.workers.parser.formats.txt import FORMAT as TEXT

SNIFF_BYTES = 4096
"""How much of a file with no known suffix is read to tell text from binary."""
_GLOB = wcglob.GLOBSTAR | wcglob.BRACE | wcglob.DOTGLOB


def suffix_of(name: str) -> str:
    """The suffix of a file name, lower case (``""`` for none)."""
    return os.path.splitext(name)[1].lower()


def starts_as_text(head: bytes) -> bool:
    """The first bytes of a file are text: no NUL, and they decode (a character cut at the end is allowed)."""
    if b"\x00" in head:
        return False
    try:
        decode_text(head)
    except ParseError:
        return False
    return True


def parse_format(path: str) -> str:
    """The format a parser is asked to read ``path``'s bytes as: ``""`` when its suffix says (the parser's own
    choice), else text (the watcher sent it as a text file)."""
    return "" if suffix_of(os.path.basename(path)) in SUFFIXES else TEXT


def read_with_ocr(path: str) -> bool:
    """``path`` is an image file, which a parser reads with OCR: about a minute on a busy machine where a text file
    takes a second, so the indexer's parse window gives such files a lane of their own
    (:mod:`foldermind.workers.indexer.ingest.parses`). A PDF is not one: its scanned pages are known only once read,
    and each is written as it is read."""
    return suffix_of(os.path.basename(path)) in IMAGE_SUFFIXES


class Rules:
    """The ``[ingest]`` rules of what is a document (see the module)."""

    def __init__(self, exclude: Iterable[str] = (), extra_text_suffixes: Iterable[str] = ()) -> None:
        self.exclude = [p.strip().strip("/") for p in exclude if p.strip().strip("/")]
        self.text_suffixes = frozenset(
            s if s.startswith(".") else "." + s for s in (x.strip().lower() for x in extra_text_suffixes) if s
        )

    @classmethod
    def of(cls, policy: IngestPolicy) -> Rules:
        return cls(policy.exclude, policy.extra_text_suffixes)

    def excluded(self, rel: str) -> bool:
        """The path ``rel`` (inside its Smart Folder, ``/``-separated) is left out by an ``exclude`` glob."""
        if not self.exclude or not rel or rel.startswith(".."):
            return False
        parts = PurePosixPath(rel).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        for pattern in self.exclude:
            if "/" in pattern:
                if any(wcglob.globmatch(p, pattern, flags=_GLOB) for p in prefixes):
                    return True
            elif any(wcglob.globmatch(part, pattern, flags=_GLOB) for part in parts):
                return True
        return False

    def known_format(self, name: str) -> str | None:
        """The format the name alone says: a parser's suffix, or text for an ``extra_text_suffixes`` one."""
        suffix = suffix_of(name)
        return SUFFIXES.get(suffix) or (TEXT if suffix in self.text_suffixes else None)

    def format_of(self, path: str, inside: Callable[[str], bool]) -> str | None:
        """The format ``path`` is read as, or None when it is no document: its name says, or its first bytes are
        text (read through :func:`userfiles.open_file`; a file that cannot be opened is no document)."""
        fmt = self.known_format(os.path.basename(path))
        if fmt is not None:
            return fmt
        try:
            with userfiles.open_file(path, inside) as opened:
                head = opened.read(SNIFF_BYTES)
        except OSError:
            return None
        return TEXT if head and starts_as_text(head) else None
