"""Criteria Smart Folders: a saved search that lists as a folder.

A criteria folder holds no files of its own: it is the set of indexed documents that match its criteria at
the moment it is used (listed, counted, searched). ``folders.list.reply`` carries them beside the path folders
(``criteria``), ``folders.remove.request`` removes them, and ``search.request`` takes a criteria folder's id as
``folder_id``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from foldermind.protocol.messages.envelope import Message, message

SERVED_BY = "the indexer"
"""Who answers the kinds of this module (docs/protocol.md's service table)."""


class CriteriaInfo(TypedDict):
    """A criteria Smart Folder: its criteria as given and what it holds now."""

    id: str
    name: str
    description: str
    query: str
    """Words a document must hold one of (after the index's stemming); `"phrases"` and `-words` as in a search;
    `""`: no word criterion."""
    file_types: list[str]
    """Extensions without the dot, lower case; empty: any."""
    modified_after: str
    """An ISO 8601 date or time, or an ISO 8601 duration (`P30D`: modified in the 30 days before each use);
    `""`: no lower bound."""
    modified_before: str
    """The same forms; exclusive; `""`: no upper bound."""
    within: str
    """An absolute directory inside a registered Smart Folder (or one itself); `""`: every registered folder."""
    added_at: float
    file_count: int
    """Indexed documents matching the criteria at the time of the reply."""


@message("folders.criteria.add.request")
@dataclass(slots=True)
class CriteriaAddRequest(Message):
    """Save a criteria Smart Folder: the indexed documents that hold a word of ``query`` and pass the
    filters (``file_types``, ``modified_after``, ``modified_before``, ``within``). At least one criterion is
    needed. Errors: ``invalid_query`` (a query with no searchable word), ``invalid_filter`` (a type no parser
    reads, a date that is none, a window that ends before it starts, no criterion at all), ``invalid_path``
    (``within`` relative, missing, or outside every registered Smart Folder), ``folder_overlap`` (a criteria
    folder of that name exists)."""

    name: str
    """Display name, 1..200 characters, unique among criteria folders (`folders remove NAME` finds it)."""
    query: str = ""
    """Up to 1000 characters; see `CriteriaInfo`."""
    file_types: list[str] = field(default_factory=list)
    """Extensions without the dot (`["pdf", "docx"]`, any case); empty: any."""
    modified_after: str = ""
    """ISO 8601 date, time or duration (see `CriteriaInfo`); `""`: no lower bound."""
    modified_before: str = ""
    """ISO 8601 date, time or duration; exclusive; `""`: no upper bound."""
    within: str = ""
    """Absolute directory inside a registered Smart Folder; `""`: all of them."""
    description: str = ""
    """What the folder holds (cut to 2000 characters)."""


@message("folders.criteria.add.reply")
@dataclass(slots=True)
class CriteriaAddReply(Message):
    """The saved criteria folder."""

    folder: CriteriaInfo
    """The new folder (`CriteriaInfo`), its `file_count` already counted."""
