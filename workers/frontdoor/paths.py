"""The path rules every path-taking tool applies before anything touches the disk.

Only the shape is checked here: absolute, OS-native, no traversal. Whether the path resolves (symlinks
followed) inside a registered Smart Folder is the indexer's call, since it alone knows the folders; it
answers ``invalid_path`` otherwise.
"""

from __future__ import annotations

import os
import re

from foldermind.protocol.errors import ErrorCode, JobError

MAX_PATH_CHARS = 4096

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DRIVE = re.compile(r"^[A-Za-z]:")


class InvalidPath(JobError):
    """A path refused by its shape; the message says which rule (never echoes more than the rule)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_PATH, message)


def check_path(raw: str) -> str:
    """Return ``raw`` if it is an absolute, OS-native path without traversal; else raise InvalidPath."""
    if not raw:
        raise InvalidPath("the path is empty")
    if len(raw) > MAX_PATH_CHARS:
        raise InvalidPath(f"the path is longer than {MAX_PATH_CHARS} characters")
    if "\x00" in raw:
        raise InvalidPath("the path contains a NUL byte")
    if raw.lower().startswith("file:") or _URL.match(raw):
        raise InvalidPath("URLs are not accepted (file:// included): give an absolute path")
    if raw.startswith(("\\\\", "//")):
        raise InvalidPath("UNC and network paths are not accepted")
    if os.name != "nt" and (_DRIVE.match(raw) or "\\" in raw.split("/", 2)[0]):
        raise InvalidPath("not a native path on this system (a Windows path?)")
    if not os.path.isabs(raw):
        raise InvalidPath("the path is relative: give an absolute path")
    if ".." in re.split(r"[\\/]", raw):
        raise InvalidPath("the path contains a '..' segment")
    return raw
