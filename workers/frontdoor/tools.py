"""The MCP tools: read-only, schema'd, typed errors, bounded inputs.

Each tool validates its input (pydantic, with explicit bounds), checks path shapes locally, then asks the
worker that owns the data through the broker with a deadline. A handler signals a failure by
raising :class:`~foldermind.protocol.errors.JobError`; the server (:mod:`.server`) turns it into a tool
error. The chat tool's body is :mod:`foldermind.workers.answers`.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import (
    FolderListReply,
    FolderListRequest,
    IndexStatusReply,
    IndexStatusRequest,
    SearchHit,
    SearchReply,
    SearchRequest,
    SimilarReply,
    SimilarRequest,
    SummaryReply,
    SummaryRequest,
)
from foldermind.protocol.messages.indexer import iso_time
from foldermind.protocol.runtime.config import LlmPolicy, McpPolicy
from foldermind.workers.answers.engine import CONTEXT_FILES, QUESTION_MAX, SESSION_ID_MAX, Chat
from foldermind.workers.framework.asyncbus import Bus
from foldermind.workers.frontdoor import reading, schemas
from foldermind.workers.frontdoor.disconnect import client_gone, until_gone
from foldermind.workers.frontdoor.keyscope import asker
from foldermind.workers.frontdoor.paths import check_path
from foldermind.workers.frontdoor.streaming import Progress

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

PathArg = Annotated[
    str, Field(min_length=1, max_length=4096, description="absolute, OS-native path of a file in a Smart Folder")
]
OptionalPath = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=4096,
        description="absolute, OS-native path of a file in a Smart Folder (may be left out with chunk_id)",
    ),
]


class Tools:
    """The tool handlers, bound to one bus and policy."""

    def __init__(self, bus: Bus, policy: McpPolicy, llm: LlmPolicy, conversations: Path | None = None) -> None:
        self.bus = bus
        self.policy = policy
        self.chat = Chat(bus, llm, owner=asker, kept=conversations)
        self.max_response = int(policy.max_response_mb * 1024 * 1024)

    def ok(self, model: BaseModel) -> CallToolResult:
        body = model.model_dump(mode="json")
        text = json.dumps(body, ensure_ascii=False)
        if len(text) > self.max_response:
            raise JobError(
                ErrorCode.RESPONSE_TOO_LARGE, f"the result is over {self.policy.max_response_mb} MiB; ask for less"
            )
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=body)

    @staticmethod
    def result(hit: SearchHit) -> schemas.SearchResult:
        loc = hit["location"]
        return schemas.SearchResult(
            file_path=hit["file_path"],
            file_name=hit["file_name"],
            score=hit["score"],
            snippet=hit["snippet"],
            smart_folder=hit["smart_folder"],
            smart_folder_id=hit["folder_id"],
            modified_at=iso_time(hit["modified_at"]) or "",
            location=schemas.Location(
                page=loc.get("page"),
                heading=loc.get("heading"),
                line_start=loc["line_start"],
                line_end=loc["line_end"],
                ocr=loc.get("ocr", False),
                ocr_confidence=loc.get("ocr_confidence"),
            ),
            chunk_id=hit["chunk_id"],
            chunk_index=hit["chunk_index"],
        )

    async def search_documents(
        self,
        query: Annotated[str, Field(min_length=1, max_length=1000, description="what to look for")],
        top_k: Annotated[int, Field(ge=1, le=50, description="how many results")] = 10,
        mode: Annotated[
            Literal["hybrid", "semantic", "keyword"],
            Field(description="hybrid: keyword and semantic fused (default); semantic: by meaning; keyword: BM25"),
        ] = "hybrid",
        smart_folder_id: Annotated[
            str | None,
            Field(
                max_length=200,
                description="only this Smart Folder (see list_smart_folders); a criteria folder's id searches the "
                "documents matching it now",
            ),
        ] = None,
        file_types: Annotated[
            list[Annotated[str, Field(max_length=20)]] | None,
            Field(max_length=32, description='only files of these extensions, without the dot: ["pdf", "txt"]'),
        ] = None,
        path_glob: Annotated[
            str | None,
            Field(
                max_length=1000,
                description="only paths matching this glob, relative to the Smart Folder ('reports/**/*.pdf'; "
                "* and ? within a folder name, ** across folders, {a,b}), or absolute when it starts with /",
            ),
        ] = None,
        modified_after: Annotated[
            str | None,
            Field(
                max_length=40,
                description="only files modified on or after this ISO date/time (UTC), or within this ISO duration "
                "back from now (P7D: the last week)",
            ),
        ] = None,
        modified_before: Annotated[
            str | None,
            Field(max_length=40, description="only files modified before this ISO date/time (UTC) or duration ago"),
        ] = None,
        group_by_file: Annotated[
            bool,
            Field(
                description="at most one result per file (its best passage), so one long file does not fill the list"
            ),
        ] = False,
        min_score: Annotated[
            float | None,
            Field(
                description="only results scoring at least this (hybrid: the best scores about 1; keyword: BM25;"
                " semantic: cosine); omit for no cut"
            ),
        ] = None,
    ) -> Annotated[CallToolResult, schemas.SearchOutput]:
        """Search the indexed documents by meaning, keyword or both. In the query, "two words" in double quotes
        must appear together and -word excludes results holding that word. Each result carries the file, a
        snippet, its location (page / heading / lines: pass them to read_document) and a stable chunk_id (pass
        it to read_document to read around the hit). Filters (file_types, path_glob, modified_after/before)
        apply inside the search: a filter that matches nothing gives no results."""
        request = SearchRequest(
            query=query,
            mode=mode,
            top_k=top_k,
            folder_id=smart_folder_id,
            file_types=list(file_types or []),
            path_glob=path_glob or "",
            modified_after=modified_after or "",
            modified_before=modified_before or "",
            min_score=min_score,
            group_by_file=group_by_file,
        )
        reply = await self.bus.call("indexer", request, SearchReply)
        return self.ok(
            schemas.SearchOutput(
                results=[self.result(hit) for hit in reply.results],
                total_matches=reply.total_matches,
                query_ms=reply.query_ms,
                mode_used=reply.mode_used,
                note=reply.note,
            )
        )

    async def chat_with_documents(
        self,
        query: Annotated[str, Field(min_length=1, max_length=QUESTION_MAX, description="the question")],
        ctx: Context[Any, Any],
        session_id: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=SESSION_ID_MAX,
                description="continue this conversation (from an earlier answer); omit to start a new one",
            ),
        ] = None,
        max_context_files: Annotated[
            int, Field(ge=1, le=20, description="files the answer may draw on")
        ] = CONTEXT_FILES,
        persona: Annotated[str | None, Field(max_length=200, description="tone of the answer, e.g. 'concise'")] = None,
        answer_mode: Annotated[
            schemas.AnswerMode | None,
            Field(
                description="extractive: the documents' own sentences, quoted (fast, no model); generative: the "
                "local model's answer, each sentence checked against the passages; auto (default): the quotes, "
                "then the model's checked sentences when any survive"
            ),
        ] = None,
        smart_folder_id: Annotated[
            str | None,
            Field(
                max_length=200,
                description="answer from this Smart Folder only (see list_smart_folders; as search_documents')",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, schemas.ChatOutput]:
        """Ask a question about the documents. The answer quotes the sentences that answer it, or is the local
        model's answer with every sentence checked against a passage; [n] markers index `citations` (first-use
        order), each with the exact `quote` and its location. `grounded` is false when no passage answers
        (the answer then says the documents do not say). Pass `session_id` back to continue a conversation,
        `smart_folder_id` to answer from one Smart Folder only.
        With a progress token, the answer comes as progress notifications too: the quotes at once, progress
        without text while the model writes, then the sentences the check kept; together, the final answer."""
        if not query.strip():
            raise JobError(ErrorCode.INVALID_QUERY, "the question is empty")

        progress = Progress(ctx)
        gone = client_gone(ctx.request_context.request)
        answering = self.chat.answer(
            query, session_id, max_context_files, persona, progress, answer_mode, smart_folder_id
        )
        out = await until_gone(answering, gone)
        await progress.flush()  # the last piece of the answer goes before the result
        if out is None:  # nobody is left to read it; the generation was cancelled
            raise JobError(ErrorCode.CANCELLED, "the client disconnected before the answer was ready")
        return self.ok(out)

    async def list_smart_folders(self) -> Annotated[CallToolResult, schemas.SmartFoldersOutput]:
        """List the Smart Folders (their ids scope search_documents): registered folders (kind path) and saved
        searches (kind criteria: the documents matching their criteria now, counted in file_count)."""
        reply = await self.bus.call("indexer", FolderListRequest(with_criteria=True), FolderListReply)
        folders = []
        for f in reply.folders:
            count = _files_directly_inside(f["path"])
            folders.append(
                schemas.SmartFolder(
                    id=f["id"],
                    name=f["name"],
                    description=f["description"],
                    kind="path",
                    destination_path=f["path"],
                    file_count=count,
                    last_organized_at=iso_time(f["last_organized_at"]) if count is not None else None,
                )
            )
        for c in reply.criteria:
            criteria = schemas.FolderCriteria.model_validate(c, from_attributes=False)
            folders.append(
                schemas.SmartFolder(
                    id=c["id"],
                    name=c["name"],
                    description=c["description"],
                    kind="criteria",
                    destination_path=c["within"],
                    file_count=c["file_count"],
                    last_organized_at=None,  # it is never organized: its documents are whatever matches now
                    criteria=criteria,
                )
            )
        return self.ok(schemas.SmartFoldersOutput(folders=folders))

    async def get_document_summary(self, file_path: PathArg) -> Annotated[CallToolResult, schemas.SummaryOutput]:
        """The cached analysis of a file (summary, category, entities, keywords, ...), by its current path or
        the path it was analyzed at. A pure lookup: no model runs."""
        check_path(file_path)
        reply = await self.bus.call("indexer", SummaryRequest(path=file_path), SummaryReply)
        analysis = dict(reply.analysis)
        at = analysis.get("analyzed_at")  # epoch seconds from the indexer
        dated = at if isinstance(at, int | float) and not isinstance(at, bool) else None
        analysis["analyzed_at"] = iso_time(dated)
        return self.ok(schemas.SummaryOutput.model_validate(analysis))

    async def read_document(
        self,
        file_path: OptionalPath = None,
        start_line: reading.StartLine = 1,
        end_line: reading.EndLine = None,
        chunk_id: reading.ChunkId = None,
        before: reading.Around = 0,
        after: reading.Around = 0,
        unit: reading.Unit = "chunks",
    ) -> Annotated[CallToolResult, schemas.ReadOutput]:
        """Read lines of an indexed file's extracted text (at most 100,000 characters; `truncated` says when
        the range was cut). Use the line numbers from a search result's location, or its chunk_id with
        before/after (in chunks, or lines with unit=lines) to read the hit with its neighbours; a chunk_id alone
        reads its file."""
        if chunk_id is None:
            if before or after:
                raise JobError(ErrorCode.INVALID_ARGUMENT, "before and after count around a chunk_id: give one")
            if file_path is None:
                raise JobError(
                    ErrorCode.INVALID_ARGUMENT, "give file_path (and a line range), or a search hit's chunk_id"
                )
            reply = await reading.read_lines(self.bus, file_path, start_line, end_line)
        elif start_line != 1 or end_line is not None:
            raise JobError(ErrorCode.INVALID_ARGUMENT, "give chunk_id or start_line/end_line, not both")
        else:
            reply = await reading.read_around(self.bus, file_path, chunk_id, before, after, unit)
        # The reply's fields are the output's, one for one.
        return self.ok(schemas.ReadOutput.model_validate(reply.to_body()))

    async def find_similar(
        self,
        file_path: PathArg,
        top_k: Annotated[int, Field(ge=1, le=25, description="how many documents")] = 5,
    ) -> Annotated[CallToolResult, schemas.SimilarOutput]:
        """Documents nearest in meaning to an indexed file (from its stored vectors; no model call)."""
        check_path(file_path)
        reply = await self.bus.call("indexer", SimilarRequest(path=file_path, top_k=top_k), SimilarReply)
        return self.ok(schemas.SimilarOutput(results=[self.result(h) for h in reply.results], note=reply.note))

    async def index_status(self) -> Annotated[CallToolResult, schemas.IndexStatusOutput]:
        """What is indexed: totals, each folder's progress, the embedding model's state, recent failures,
        whether indexing waits for disk space, the file formats read (and whether OCR reads scans and
        images), and how many files were left out as unsupported."""
        reply = await self.bus.call("indexer", IndexStatusRequest(), IndexStatusReply)
        emb, disk, ocr = reply.embedding, reply.storage, reply.ocr
        return self.ok(
            schemas.IndexStatusOutput(
                totals=reply.totals,
                folders=[schemas.FolderProgress.model_validate(dict(f)) for f in reply.folders],
                embedding=schemas.EmbeddingState(
                    model=str(emb.get("model", "")),
                    dim=int(emb.get("dim", 0)),
                    state=str(emb.get("state", "unknown")),
                    note=emb.get("note") or None,
                    query_backend=emb.get("query_backend"),
                    precision=emb.get("precision"),
                ),
                recent_failures=[
                    schemas.Failure(file_path=f["path"], status=f["status"], error=f["error"])
                    for f in reply.recent_failures
                ],
                indexing=[
                    schemas.Failure(file_path=f["path"], status=f["status"], error=f["error"]) for f in reply.indexing
                ],
                storage=schemas.StorageState(
                    state=str(disk.get("state", "ok")),
                    message=disk.get("message") or None,
                    since=iso_time(disk.get("since")),
                ),
                formats=[schemas.FileFormat.model_validate(dict(f)) for f in reply.formats],
                ocr=schemas.OcrState(
                    enabled=bool(ocr.get("enabled")), available=bool(ocr.get("available")), note=ocr.get("note") or None
                ),
                unsupported=dict(reply.unsupported),
            )
        )

    def register(self, server: MCPServer[Any]) -> None:
        for fn in (
            self.search_documents,
            self.chat_with_documents,
            self.list_smart_folders,
            self.get_document_summary,
            self.read_document,
            self.find_similar,
            self.index_status,
        ):
            # The docstring without its source indentation (the SDK sends __doc__ as it is).
            description = inspect.cleandoc(fn.__doc__ or "")
            server.add_tool(fn, description=description, annotations=READ_ONLY, structured_output=True)
        for tool in server._tool_manager.list_tools():  # published flat; the SDK reads fn_metadata live
            tool.fn_metadata.output_schema = schemas.flat(tool.fn_metadata.output_schema)


def _files_directly_inside(path: str) -> int | None:
    try:
        with os.scandir(path) as entries:
            return sum(1 for e in entries if e.is_file(follow_symlinks=False))
    except OSError:
        return None
