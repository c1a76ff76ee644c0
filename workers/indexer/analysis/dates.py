"""The document's date: the first date written in it that reads unambiguously."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

#
# Shapes read: ISO 2025-03-04 (also 2025/03/04 and 2025.03.04), "March 3, 2025" / "Mar 3rd 2025",
# "3 March 2025" / "3rd of March, 2025" / "3-Mar-2025", and numeric dd.mm.yyyy or nn/nn/yyyy.
# Numeric dates with slashes are ambiguous (US month/day, elsewhere day/month). The choice: one is read
# when its numbers decide (13/04/2025 is day-first, 04/13/2025 month-first, 04/04/2025 either way) or
# when another numeric date in the same document decides the convention; an ambiguous date in a document
# that never decides is not read at all, since a wrong date is worse than the file's mtime. Dotted
# dates (03.04.2025) are day-first: that is where the dotted style is written. Years 1900..2100, real
# calendar days only (2025-02-30 is no date). The first date that reads is the document's date: letters,
# invoices, minutes and papers put theirs at the top.

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MON = r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" + (
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_ORD = r"(?:st|nd|rd|th)?"
_DATE = re.compile(
    r"(?<![\w\-/.])(?:"
    # an ISO date may go on with a time (2025-03-04T10:00), never with more digits
    r"(?P<iy>\d{4})(?P<isep>[-/.])(?P<im>\d{1,2})(?P=isep)(?P<id>\d{1,2})(?![/.-]?\d)"
    rf"|(?P<mm>{_MON})\.?\s+(?P<md>\d{{1,2}}){_ORD},?\s+(?P<my>\d{{4}})(?![\w])"
    rf"|(?P<dd>\d{{1,2}}){_ORD}(?:\s+of\s+|\s+|-)(?P<dm>{_MON})\.?,?(?:\s+|-)(?P<dy>\d{{4}})(?![\w])"
    r"|(?P<na>\d{1,2})(?P<nsep>[/.])(?P<nb>\d{1,2})(?P=nsep)(?P<ny>\d{4})(?![/.-]?\d|[^\W\d_])"
    r")",
    re.IGNORECASE,
)
MAX_DATE_MATCHES = 500


def _valid(y: int, m: int, d: int) -> str | None:
    if not 1900 <= y <= 2100:
        return None
    try:
        return date(y, m, d).isoformat()
    except ValueError:
        return None


def find_date(text: str) -> str | None:
    """The first plausible date written in ``text``, as ``YYYY-MM-DD``, else None."""
    matches = []
    for i, m in enumerate(_DATE.finditer(text)):
        if i >= MAX_DATE_MATCHES:
            break
        matches.append(m)
    # The document's numeric convention, from its numeric dates whose numbers decide it.
    day_first = month_first = False
    for m in matches:
        if m["na"] and m["nsep"] == "/":
            a, b = int(m["na"]), int(m["nb"])
            day_first |= a > 12 >= b
            month_first |= b > 12 >= a
    convention_day_first = day_first and not month_first
    convention_month_first = month_first and not day_first
    for m in matches:
        found: str | None = None
        if m["iy"]:
            found = _valid(int(m["iy"]), int(m["im"]), int(m["id"]))
        elif m["mm"]:
            found = _valid(int(m["my"]), _MONTHS[m["mm"][:3].lower()], int(m["md"]))
        elif m["dd"]:
            found = _valid(int(m["dy"]), _MONTHS[m["dm"][:3].lower()], int(m["dd"]))
        else:
            a, b, y = int(m["na"]), int(m["nb"]), int(m["ny"])
            if m["nsep"] == "." or a > 12 or convention_day_first:
                found = _valid(y, b, a)
            elif b > 12 or a == b or convention_month_first:
                found = _valid(y, a, b)
        if found:
            return found
    return None


def mtime_date(mtime: float) -> str | None:
    try:
        return datetime.fromtimestamp(mtime, UTC).date().isoformat()
    except (OverflowError, OSError, ValueError, TypeError):
        return None
