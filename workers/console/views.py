"""What the console's pages show, asked over the bus: the overview (workers, folders, failed and skipped files),
a search's results with the query's words marked in each snippet (where the indexer's stemmer finds them), a
document's extracted text around a hit (the indexer reads only files of the registered folders) and its PDF page
(a parser renders it), and answers (chat_with_documents' own engine, :mod:`foldermind.workers.answers`, asking the
indexer and the llm over this console's bus: the Ask page works with the front door down).

A worker that does not answer costs its part of the page a note, never the page: the console stays up while
the indexer restarts. Nothing here logs a query or a document's text.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import zmq

from foldermind.protocol.errors import JobError
from foldermind.protocol.messages import (
    DescribeReply,
    DescribeRequest,
    FolderAddReply,
    FolderAddRequest,
    FolderListReply,
    FolderListRequest,
    FolderRemoveReply,
    FolderRemoveRequest,
    IndexStatusReply,
    IndexStatusRequest,
    ReadDocumentReply,
    ReadDocumentRequest,
    RenderReply,
    RenderRequest,
    SearchHit,
    SearchReply,
    SearchRequest,
    StatusReply,
    StatusRequest,
)
from foldermind.workers.answers.engine import CONTEXT_FILES, QUESTION_MAX, SESSION_ID_MAX, Chat
from foldermind.workers.framework.asyncbus import Bus

MODES = ("hybrid", "keyword", "semantic")
MAX_FAILURES = 200


@dataclass(slots=True)
class Overview:
    status: StatusReply | None = None
    index: IndexStatusReply | None = None
    problems: list[str] = field(default_factory=list)
    failures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Failed and skipped files by folder id, each ``{path, status, error}``."""
    disk_bytes: int | None = None
    """The index's size on disk (the indexer's ``describe``), None while unknown."""


async def add_folder(bus: Bus, path: str, name: str) -> str:
    """Register ``path`` as a Smart Folder as ``foldermind folders add`` does (the indexer checks it is an absolute
    path to a folder that is not foldermind's own nor overlaps another, and has the watcher watch it); the
    problem in a sentence, or "" when it is registered."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        return f"{path or 'an empty path'} is not an absolute path: give the folder's whole path (/home/me/Notes)"
    try:
        await bus.call("indexer", FolderAddRequest(path, name[:200]), FolderAddReply)
    except JobError as exc:
        return exc.message
    return ""


async def remove_folder(bus: Bus, folder: str) -> str:
    """Unregister a Smart Folder and purge its index entries (its files are never touched), as ``folders remove``."""
    try:
        await bus.call("indexer", FolderRemoveRequest(folder), FolderRemoveReply)
    except JobError as exc:
        return exc.message
    return ""


@dataclass(frozen=True, slots=True)
class Scope:
    """A Smart Folder a search can be scoped to: a registered folder or a criteria folder (as search_documents'
    ``smart_folder_id`` takes either)."""

    id: str
    name: str
    criteria: bool
    count: int


async def scopes(bus: Bus) -> list[Scope]:
    """The Smart Folders, path folders first, for a search's scope (none while the indexer does not answer)."""
    try:
        reply = await bus.call("indexer", FolderListRequest(with_criteria=True), FolderListReply)
    except JobError:
        return []
    folders = [Scope(f["id"], f["name"], False, f["files_indexed"]) for f in reply.folders]
    return folders + [Scope(c["id"], c["name"], True, c["file_count"]) for c in reply.criteria]


async def overview(bus: Bus) -> Overview:
    out = Overview()
    try:
        out.status = await bus.call("kernel", StatusRequest(), StatusReply)
    except JobError as exc:
        out.problems.append(f"the kernel did not answer: {exc.message}")
    try:
        out.index = await bus.call("indexer", IndexStatusRequest(max_failures=MAX_FAILURES), IndexStatusReply)
    except JobError as exc:
        out.problems.append(f"folders are unavailable for now: {exc.message}")
    else:
        for failure in out.index.recent_failures:
            out.failures.setdefault(failure["folder_id"], []).append(dict(failure))
        with contextlib.suppress(JobError):
            described = await bus.call("indexer", DescribeRequest(), DescribeReply)
            size = described.details.get("disk_bytes")
            out.disk_bytes = size if isinstance(size, int) else None
    return out


@dataclass(slots=True)
class SearchForm:
    query: str = ""
    mode: str = "hybrid"
    folder: str = ""
    file_types: str = ""
    path_glob: str = ""
    modified_after: str = ""
    modified_before: str = ""
    group_by_file: bool = False
    top_k: int = 10

    @classmethod
    def parse(cls, params: Any) -> SearchForm:
        def text(name: str, limit: int = 1000) -> str:
            return str(params.get(name, "")).strip()[:limit]

        top_k = text("top_k", 4)
        return cls(
            query=text("q"),
            mode=text("mode") if text("mode") in MODES else "hybrid",
            folder=text("folder"),
            file_types=text("types", 200),
            path_glob=text("glob"),
            modified_after=text("after", 40),
            modified_before=text("before", 40),
            group_by_file=text("group") == "1",
            top_k=min(max(int(top_k), 1), 50) if top_k.isdigit() else 10,
        )

    def request(self) -> SearchRequest:
        types = [t.strip().lstrip(".") for t in re.split(r"[,\s]+", self.file_types) if t.strip()]
        return SearchRequest(
            query=self.query,
            mode=self.mode,
            top_k=self.top_k,
            folder_id=self.folder or None,
            file_types=types,
            path_glob=self.path_glob,
            modified_after=self.modified_after,
            modified_before=self.modified_before,
            group_by_file=self.group_by_file,
            with_marks=True,
        )


@dataclass(slots=True)
class Results:
    reply: SearchReply | None = None
    error: str = ""
    hits: list[dict[str, Any]] = field(default_factory=list)


async def search(bus: Bus, form: SearchForm) -> Results:
    if not form.query:
        return Results()
    try:
        reply = await bus.call("indexer", form.request(), SearchReply)
    except JobError as exc:
        return Results(error=exc.message)
    hits = [
        {**hit, "where": location(hit), "parts": marked(hit["snippet"], hit.get("marks", []))} for hit in reply.results
    ]
    return Results(reply=reply, hits=hits)


def location(hit: SearchHit) -> str:
    """Where a hit is in its file, as a person reads it: page, heading, lines."""
    loc = hit["location"]
    parts: list[str] = []
    if "page" in loc:
        end = loc.get("page_end")
        parts.append(f"pages {loc['page']}-{end}" if end and end != loc["page"] else f"page {loc['page']}")
    if loc.get("heading"):
        parts.append(f"“{loc['heading']}”")
    parts.append(f"lines {loc['line_start']}-{loc['line_end']}")
    return ", ".join(parts)


def marked(snippet: str, marks: list[list[int]]) -> list[tuple[str, bool]]:
    """The snippet cut into (text, marked) parts at the indexer's ``marks`` (the query's words as the index stems
    them); the template escapes each part and wraps the marked ones in ``<mark>``."""
    parts: list[tuple[str, bool]] = []
    at = 0
    for start, end in marks:
        if not at <= start < end <= len(snippet):
            continue  # not a span of this snippet: nothing is marked rather than the wrong text
        if start > at:
            parts.append((snippet[at:start], False))
        parts.append((snippet[start:end], True))
        at = end
    if at < len(snippet):
        parts.append((snippet[at:], False))
    return parts


CONTEXT_CHUNKS = 3
"""Chunks shown before and after a hit's own in its preview."""
PAGE_LINES = 80
"""Lines an earlier / later step of a preview shows."""


@dataclass(slots=True)
class Preview:
    path: str
    reply: ReadDocumentReply | None = None
    error: str = ""
    passage: tuple[int, int] = (0, 0)
    """The hit's lines, marked in the text (0, 0: none)."""
    lines: list[tuple[int, str]] = field(default_factory=list)
    ocr: list[dict[str, Any]] = field(default_factory=list)


def int_param(params: Any, name: str) -> int | None:
    value = str(params.get(name, "")).strip()
    return int(value) if value.isdigit() and len(value) < 10 else None


async def preview(bus: Bus, params: Any) -> Preview:
    """A document's extracted text around a hit (``chunk`` and its lines ``ls``..``le``) or a range of lines
    (``start``..``end``), read by the indexer, which serves only files of the registered folders."""
    out = Preview(path=str(params.get("path", ""))[:4096])
    chunk, start, end = int_param(params, "chunk"), int_param(params, "start"), int_param(params, "end")
    if chunk is not None:
        ask = ReadDocumentRequest(out.path, chunk_id=chunk, before=CONTEXT_CHUNKS, after=CONTEXT_CHUNKS)
    else:
        first = max(start or 1, 1)
        ask = ReadDocumentRequest(out.path, start_line=first, end_line=max(end or first + PAGE_LINES - 1, first))
    try:
        out.reply = await bus.call("indexer", ask, ReadDocumentReply)
    except JobError as exc:
        out.error = exc.message
        return out
    ls, le = int_param(params, "ls"), int_param(params, "le")
    if ls and le:
        out.passage = (ls, le)
    first = out.reply.start_line
    out.lines = list(enumerate(out.reply.text.split("\n"), start=first)) if out.reply.end_line >= first else []
    out.ocr = [dict(page) for page in out.reply.ocr_pages]
    return out


RENDER_TIMEOUT_S = 30.0
"""A page render may wait for a parser to start (the pool runs on demand)."""
MAX_PIXELS = 2_000_000
"""A rendered page holds at most this many pixels."""


@dataclass(slots=True)
class PageImage:
    png: bytes
    reply: RenderReply


async def page_image(bus: Bus, path: str, page: int, lines: tuple[int, int]) -> PageImage | str:
    """Page ``page`` of the PDF at ``path`` with the passage (``lines`` of its extracted text) marked, or why not.
    The indexer reads the passage first: a path outside the registered folders stops there, and the parser
    renders the file the indexer resolved."""
    start, end = lines if lines[0] else (1, 1)
    try:
        text = await bus.call("indexer", ReadDocumentRequest(path, start_line=start, end_line=end), ReadDocumentReply)
        ask = RenderRequest(
            text.file_path,
            page,
            MAX_PIXELS,
            [t.strip() for t in text.text.split("\n") if len(t.strip()) >= 4] if lines[0] else [],
        )
        reply, buffers = await bus.call_with_buffers("parser", ask, RenderReply, timeout=RENDER_TIMEOUT_S)
    except JobError as exc:
        return exc.message
    raw = buffers[0]
    return PageImage(raw.bytes if isinstance(raw, zmq.Frame) else bytes(raw), reply)


@dataclass(slots=True)
class Answer:
    question: str = ""
    error: str = ""
    output: dict[str, Any] = field(default_factory=dict)
    parts: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    """The answer's text cut at its [n] markers: (text, None), or (marker, its citation with ``href``)."""
    citations: list[dict[str, Any]] = field(default_factory=list)
    """Each citation with ``href``, its preview at the passage."""


def cited_href(citation: dict[str, Any]) -> str:
    """The preview of a citation's passage, opened at it."""
    loc = citation.get("location") or {}
    query = {"path": citation["file_path"], "chunk": citation["chunk_id"]}
    query.update({"ls": loc.get("line_start", 0), "le": loc.get("line_end", 0)})
    if loc.get("page"):
        query["page"] = loc["page"]
    return f"/preview?{urlencode(query)}#L{loc.get('line_start', 1)}"


async def ask(chat: Chat, question: str, session_id: str) -> Answer:
    """A question answered by chat_with_documents' own engine, as the tool answers it."""
    out = Answer(question=question)
    if not question:
        return out
    try:
        answering = chat.answer(question[:QUESTION_MAX], session_id[:SESSION_ID_MAX] or None, CONTEXT_FILES, None, None)
        answer = (await answering).model_dump(mode="json")
    except JobError as exc:
        out.error = f"{exc.code.mcp}: {exc.message}"
        return out
    out.output = answer
    out.citations = [{**c, "href": cited_href(c)} for c in answer.get("citations", [])]
    cites = {c["id"]: c for c in out.citations}
    for piece in re.split(r"(\[\d+\])", str(answer.get("answer", ""))):
        marker = re.fullmatch(r"\[(\d+)\]", piece)
        out.parts.append((piece, cites.get(int(marker.group(1))) if marker else None))
    return out
