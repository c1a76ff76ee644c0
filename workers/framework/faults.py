"""The test switches of the real workers, all in one place (jupyter_client's test-kernel idea, inside the
production workers so a test can catch them mid-job).

Every switch is an environment variable named ``FOLDERMIND_TEST_*`` (:data:`PREFIX`), set by a test in a
worker's ``env`` table of its home's ``supervisor.toml``; each constant below names one, with its syntax and what
it does. Production code never imports this module when no such variable is set: it asks
:func:`foldermind.workers.framework.base.testing` first, which is false in a normal run, so a user's process cannot trip
a switch it did not name this way. ``tests/README.md`` lists the switches and the tests that use them.

A hold (``..._HOLD...=NEEDLE:FLAG`` or ``STAGE:FLAG``) waits while the file FLAG exists, at most
:data:`HOLD_MAX_S`, after creating ``FLAG.held`` so the test knows it is held.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from foldermind.workers.framework.base import TEST_SWITCH_PREFIX as PREFIX

log = logging.getLogger("foldermind.faults")

DELAY = PREFIX + "DELAY"
"""``DELAY=KIND:SECONDS[,KIND:SECONDS]``: sleep that long before handling each message of that kind (kill the
worker mid-request, let a deadline pass)."""
PARSER_HOLD = PREFIX + "PARSER_HOLD"
"""``PARSER_HOLD=NEEDLE:FLAG``: a parse of a file whose name contains NEEDLE holds before it starts, so a test can
change the file between the indexer's look at it and the parse, every time."""
PARSER_HOLD_REPLY = PREFIX + "PARSER_HOLD_REPLY"
"""``PARSER_HOLD_REPLY=NEEDLE:FLAG``: the same, holding after the parse, before its reply or error goes out: a
test can change the file while its old content is parsed."""
PARSER_HOLD_PAGES = PREFIX + "PARSER_HOLD_PAGES"
"""``PARSER_HOLD_PAGES=NEEDLE:FLAG``: the same, holding after each ``parse.partial`` of pages read ahead of the
reply (:mod:`foldermind.workers.parser.stream`): a test looks at a document half indexed."""
INDEXER_HOLD = PREFIX + "INDEXER_HOLD"
"""``INDEXER_HOLD=STAGE:FLAG[,STAGE:FLAG]``: the indexer holds at STAGE: ``vectors``, between the first and the
second slice of an embedding reply's vectors; ``commit``, with the journal's documents given to Tantivy's writer
and not yet committed; ``search``, in a search's handler; ``read``, before a pending file is opened to be hashed
and sent to a parser; ``graph``, in a rebuild of the vector graph beside the one in use, before it reads SQLite's
vectors (at most :data:`HOLD_BESIDE_S`: nothing waits on that thread). Only the first arrival at a stage holds (the
others pass), so a test searches meanwhile."""
LLM_HANG = PREFIX + "LLM_HANG"
"""``LLM_HANG=hang|hang-once:PATH``: every chat generation blocks forever after its first token, as a wedged
native call would; ``hang-once:PATH`` only the first generation that creates PATH (the replacement answers)."""
LLM_SLOW = PREFIX + "LLM_SLOW"
"""``LLM_SLOW=SECONDS:PATH``: each generated chat token takes SECONDS longer while PATH exists (a slow model); a
number written in PATH replaces SECONDS."""
LLM_SAY = PREFIX + "LLM_SAY"
"""``LLM_SAY=PATH``: while PATH exists, a chat answer is PATH's text instead of the model's (the model still loads
and the prompt is still built), so a test feeds the answer check exactly the sentences it means to."""
WATCHER_HOLD = PREFIX + "WATCHER_HOLD"
"""``WATCHER_HOLD=FLAG``: the watcher holds after a folder's scan listed its files, before it sends the list to the
indexer, so a test can change the folder between the scan and its reconcile, every time."""
CONSOLE_HANG = PREFIX + "CONSOLE_HANG"
"""``CONSOLE_HANG=PATH``: while PATH exists, a console search page blocks the web server's event loop (at most
:data:`HOLD_MAX_S`), as a page stuck in a blocking call would."""
SWITCHES = (
    DELAY,
    PARSER_HOLD,
    PARSER_HOLD_REPLY,
    PARSER_HOLD_PAGES,
    INDEXER_HOLD,
    LLM_HANG,
    LLM_SLOW,
    LLM_SAY,
    WATCHER_HOLD,
    CONSOLE_HANG,
)

HOLD_MAX_S = 30.0
HOLD_BESIDE_S = 600.0
"""The longest hold of a thread that holds nothing else back (the indexer's ``graph`` stage)."""


_unknown = sorted(k for k in os.environ if k.startswith(PREFIX) and k not in SWITCHES)
if _unknown:
    log.warning("unknown test switches ignored: %s", ", ".join(_unknown))


def delays() -> dict[str, float]:
    """Seconds to sleep before handling a message, by kind (``FOLDERMIND_TEST_DELAY``)."""
    out: dict[str, float] = {}
    for item in filter(None, (part.strip() for part in os.environ.get(DELAY, "").split(","))):
        kind, _, seconds = item.rpartition(":")
        try:
            out[kind] = float(seconds)
        except ValueError:
            log.warning("ignoring malformed %s entry %r", DELAY, item)
    return out


def parser_hold(path: Path, after: bool, pages: bool = False) -> None:
    """Hold a parse of ``path`` before it starts (``after`` false), before its reply goes out, or (``pages``)
    after it sent pages read ahead of its reply."""
    name = PARSER_HOLD_PAGES if pages else PARSER_HOLD_REPLY if after else PARSER_HOLD
    needle, sep, flag = os.environ.get(name, "").partition(":")
    if not sep or not needle or needle not in path.name or not os.path.exists(flag):
        return
    log.warning("%s: holding a parse until the test lets it go", name)
    hold_while(flag)


def indexer_hold(stage: str) -> None:
    """Hold the indexer's ingest thread at ``stage`` while the switch's flag for it exists."""
    for item in os.environ.get(INDEXER_HOLD, "").split(","):
        name, sep, flag = item.strip().partition(":")
        if sep and name == stage and os.path.exists(flag):
            try:  # only the first arrival holds: searches side by side must not all wait
                os.close(os.open(f"{flag}.held", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
            log.warning("%s: holding the indexer at %s until the test lets it go", INDEXER_HOLD, stage)
            hold_while(flag, HOLD_BESIDE_S if stage == "graph" else HOLD_MAX_S)


def watcher_hold() -> None:
    """Hold the watcher's reconcile of a folder between its scan and its request while the switch's flag exists."""
    flag = os.environ.get(WATCHER_HOLD, "")
    if flag and os.path.exists(flag):
        log.warning("%s: holding a folder's reconcile until the test lets it go", WATCHER_HOLD)
        hold_while(flag)


def hold_while(flag: str, most: float = HOLD_MAX_S) -> None:
    """Wait while ``flag`` exists, at most ``most`` seconds, having made ``<flag>.held`` (the test waits for it)."""
    Path(f"{flag}.held").touch()
    give_up = time.monotonic() + most
    while os.path.exists(flag) and time.monotonic() < give_up:
        time.sleep(0.01)


def llm_hang() -> bool:
    """Whether this chat generation should block forever after its first token."""
    fault = os.environ.get(LLM_HANG, "")
    if fault == "hang":
        return True
    if fault.startswith("hang-once:"):
        try:
            os.close(os.open(fault.split(":", 1)[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True
    return False


def llm_slow() -> float:
    """Extra seconds per generated chat token."""
    seconds, _, path = os.environ.get(LLM_SLOW, "").partition(":")
    try:
        with open(path) as file:
            return float(file.read().strip() or seconds)
    except (OSError, ValueError):
        return 0.0


def llm_say() -> str | None:
    """The scripted chat answer, or None for the model's own."""
    path = os.environ.get(LLM_SAY, "")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None


def console_hang() -> None:
    """``FOLDERMIND_TEST_CONSOLE_HANG``: block the calling thread while its file exists (at most HOLD_MAX_S)."""
    flag = os.environ.get(CONSOLE_HANG, "")
    if flag and os.path.exists(flag):
        log.warning("%s: blocking the console's web server until the test lets it go", CONSOLE_HANG)
        hold_while(flag)
