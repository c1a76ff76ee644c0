"""A document's category: the shelf a person files it on, from what the document is (its type), never from the
folder it sits in (its path says that already).

The types (:mod:`.doctype`) group into a few categories, a table (data, not code). A type only its format gave
(``web_page``, ``pdf_document``: no content rule matched) says nothing of the document: ``general``.
"""

from __future__ import annotations

CATEGORIES: dict[str, str] = {
    "invoice": "finance",
    "receipt": "finance",
    "contract": "legal",
    "legal_document": "legal",
    "email": "correspondence",
    "letter": "correspondence",
    "meeting_notes": "notes",
    "notes": "notes",
    "research_paper": "research",
    "report": "reports",
    "presentation": "reports",
    "manual": "technical",
    "source_code": "technical",
    "resume": "career",
    "spreadsheet": "data",
}
"""Type -> category; every type of :data:`.doctype.TYPE_RULES` has one."""
GENERAL = "general"


def category_of(kind: str, by_rule: bool) -> str:
    """The category of a document of type ``kind`` (``by_rule``: a content rule chose it, not the format)."""
    return CATEGORIES.get(kind, GENERAL) if by_rule else GENERAL
