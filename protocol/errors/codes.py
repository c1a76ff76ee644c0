"""The error catalogue: every error code foldermind produces, declared once as a member of :class:`ErrorCode`.

Each member holds its wire value, its :class:`~foldermind.protocol.errors.fault.Fault`, whether it is retryable by
default, who produces it, the sentence a user reads, and the code an MCP client sees. There is no other table of
codes: the broker, the workers, the front door and the CLI all read these members, docs/protocol.md's error table
is rendered from them (:mod:`foldermind.protocol.reference`), and a test forbids code strings anywhere else.
"""

from __future__ import annotations

from enum import StrEnum

from foldermind.protocol.errors.fault import Fault


class ErrorCode(StrEnum):
    """Every error code, with its catalogue entry (``fault``, ``retryable``, ``source``, ``meaning``, ``mcp``).

    The member's value is the code on the wire (lower case). ``mcp`` is what an MCP client sees: the code in
    upper case, except for the bus's own failures, which a client sees as ``SERVICE_UNAVAILABLE`` (retry
    later; the internal cause stays in the message). ``argument`` names the tool argument whose invalid
    value a client sees as this code (a schema violation of any other argument is ``INVALID_ARGUMENT``).
    """

    fault: Fault
    retryable: bool
    source: str
    meaning: str
    mcp: str
    argument: str

    def __new__(
        cls, value: str, fault: Fault, retryable: bool, source: str, meaning: str, mcp: str = "", argument: str = ""
    ) -> ErrorCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.fault = fault
        member.retryable = retryable
        member.source = source
        member.meaning = meaning
        member.mcp = mcp or value.upper()
        member.argument = argument
        return member

    @classmethod
    def of(cls, raw: object) -> ErrorCode:
        """The member for a code read off the wire; a code this build does not know is ``internal``."""
        found = cls._value2member_map_.get(raw) if isinstance(raw, str) else None
        return found if isinstance(found, ErrorCode) else ErrorCode.INTERNAL

    @classmethod
    def for_argument(cls, name: str) -> ErrorCode | None:
        """The code an invalid value of the tool argument ``name`` is, if one is declared for it."""
        return next((code for code in cls if code.argument == name), None)

    # The bus and the kernel.
    WORKER_LOST = (
        "worker_lost",
        Fault.LOST,
        True,
        "broker, llm (`llm.chat.request`, `llm.likely.request`)",
        "The worker holding the job died, disconnected, missed heartbeats, or was restarted or stood down. "
        "The job may be retried. The llm worker asked to stop ends a chat answer or a reading in hand at its next "
        "token with this code, rather than finish it first.",
        "SERVICE_UNAVAILABLE",
    )
    DEADLINE_EXCEEDED = (
        "deadline_exceeded",
        Fault.TIMEOUT,
        False,
        "broker",
        "The job was not answered before its deadline, either while a worker held it (that worker is cancelled, "
        "and replaced if it is still busy `bus.overrun_grace_s` later) or while it was still queued (then it "
        "is retryable). The deadline may also have passed before the request arrived.",
        "SERVICE_UNAVAILABLE",
    )
    SERVICE_UNAVAILABLE = (
        "service_unavailable",
        Fault.UNAVAILABLE,
        False,
        "broker",
        "No worker of that name or service is running or coming back: an unknown target, an empty `to`, every "
        "slot FAILED or EXITED, a remote member lost with jobs still queued for its name, or the kernel stopping "
        "with the job still queued.",
    )
    SHUTTING_DOWN = (
        "shutting_down",
        Fault.UNAVAILABLE,
        False,
        "broker, kernel",
        "The kernel is stopping and accepts no new jobs.",
        "SERVICE_UNAVAILABLE",
    )
    MESSAGE_TOO_LARGE = (
        "message_too_large",
        Fault.REJECTED,
        False,
        "broker",
        "The message was larger than `bus.max_message_mb` in total and was not delivered (see "
        "[Rejection rules](#rejection-rules)).",
        "SERVICE_UNAVAILABLE",
    )
    CANCELLED = (
        "cancelled",
        Fault.CANCELLED,
        False,
        "broker, the worker holding the job, frontdoor",
        "The caller gave the job up with `job.cancel` (see [`job.cancel`](#jobcancel)); for an MCP client, it "
        "disconnected before the answer was ready.",
    )
    UNKNOWN_WORKER = (
        "unknown_worker",
        Fault.REJECTED,
        False,
        "kernel (control API)",
        "`ctl.restart.request` names no worker or pool, or `ctl.attach.request` names no worker or one that is "
        "already attached.",
    )
    BAD_REQUEST = (
        "bad_request",
        Fault.REJECTED,
        False,
        "worker, kernel",
        "The header was well-formed but the body did not fit its kind (a missing required field or a non-map "
        "body). The kernel also returns it for a kind that is not registered at all. Workers also use it when "
        "a field's value is out of range (see the kinds below); the test worker, for an unknown fault action.",
    )
    UNKNOWN_KIND = (
        "unknown_kind",
        Fault.REJECTED,
        False,
        "worker, kernel",
        "The receiver has no handler for that kind.",
    )
    INTERNAL = (
        "internal",
        Fault.LOST,
        False,
        "worker, frontdoor",
        "The handler raised an unexpected exception; the details are in that worker's log. A code this build "
        "does not know is read as `internal`.",
    )

    # The parser.
    PARSE_FAILED = (
        "parse_failed",
        Fault.FAILED,
        False,
        "parser (`parse.request`)",
        "The file could not be turned into text. The message says why: `unsupported format: .xyz`, `not a "
        "text file`, `no extractable text (scanned?)`, `encrypted PDF`, `corrupt PDF: ...`, `corrupt DOCX: "
        "...` (likewise PPTX, XLSX, EPUB, OpenDocument, RTF), `suspicious DOCX (zip bomb?)` (likewise for "
        "every zip format), `suspicious XLSX (XML entity declarations)` (PPTX, XLSX, EPUB, OpenDocument), "
        "`malformed CSV: ...`, `malformed HTML: ...`, `out of memory` (with the parser's memory cap when it "
        "has one), `document nested too deeply`.",
    )
    FILE_TOO_LARGE = (
        "file_too_large",
        Fault.REJECTED,
        False,
        "parser (`parse.request`)",
        "The file is larger than `max_bytes`, or it holds more than the parser reads of one file: "
        "`spreadsheet too large: more than 1000000 cells (the limit)` (XLSX, ODS, CSV), `mailbox too large: "
        "more than 10000 messages (the limit)`, `DOCX inflates past 96 MB` (every zip format: its parts "
        "inflate past a sixteenth of the parser's memory cap).",
    )
    UNREADABLE = (
        "unreadable",
        Fault.FAILED,
        False,
        "parser (`parse.request`)",
        "The file could not be read (an `OSError`, or the path is a folder).",
    )
    FILE_CONTENT_NEEDED = (
        "file_content_needed",
        Fault.REJECTED,
        False,
        "parser (`parse.request`)",
        "A parse request without the file's bytes: a parser reads no path (the indexer sends every file's bytes "
        "as `content`, and sends them again to a parser that asks). A caller never sees it.",
    )
    MODEL_UNAVAILABLE = (
        "model_unavailable",
        Fault.UNAVAILABLE,
        True,
        "embedder (`embed.request`), parser (`parse.request`)",
        "The embedding model is still loading or failed to load (embedder), or the model's tokenizer could not "
        "be loaded (parser). The message gives the reason.",
    )

    # The indexer.
    INVALID_QUERY = (
        "invalid_query",
        Fault.REJECTED,
        False,
        "indexer (`search.request`, `folders.criteria.add.request`), frontdoor",
        "The query is empty or longer than 1000 characters after stripping, `mode` is not `hybrid`, `semantic` "
        "or `keyword`, `fusion` is not `blend`, `weighted`, `rrf` or `evidence`, `top_k` is not an integer, or "
        "`min_score` is not a number; a criteria folder's query is longer than 1000 characters or holds no word to "
        "look for.",
        "",
        "query",
    )
    INVALID_SMART_FOLDER = (
        "invalid_smart_folder",
        Fault.REJECTED,
        False,
        "indexer (`search.request`), frontdoor",
        "`folder_id` names no registered Smart Folder and no criteria folder.",
        "",
        "smart_folder_id",
    )
    INVALID_FILTER = (
        "invalid_filter",
        Fault.REJECTED,
        False,
        "indexer (`search.request`, `folders.criteria.add.request`), frontdoor",
        "A search filter's value is not one it accepts: a `file_types` entry that is not an extension a parser "
        "reads, a `path_glob` that is no glob pattern or an absolute one outside every Smart Folder, a "
        "`modified_after` / `modified_before` that is no ISO 8601 date, time or duration, or a window that ends "
        "before it starts; or a criteria folder with no criterion at all. The message names the field and the "
        "rule. (A valid filter that admits no document is not an error: the search has no results.)",
    )
    INVALID_PATH = (
        "invalid_path",
        Fault.REJECTED,
        False,
        "indexer (`folders.add.request`, `folders.criteria.add.request`, `doc.read.request`, `doc.similar.request`, "
        "`doc.summary.request`), frontdoor",
        "The path is empty, relative, contains a NUL byte or a `..` segment, or does not resolve to an existing "
        "folder (`folders.add`); a criteria folder's `within` is not a folder inside a registered Smart Folder "
        "(or one itself); for the `doc.*` kinds, it resolves (symlinks followed) outside every registered Smart "
        "Folder or is not a file. `folders.add` also refuses foldermind's own folders (the home's config, data, logs "
        "and sockets, the model cache), a folder inside one, or one holding one.",
        "",
        "file_path",
    )
    FILE_NOT_INDEXED = (
        "file_not_indexed",
        Fault.REJECTED,
        False,
        "indexer (`doc.read.request`, `doc.similar.request`)",
        "The file is inside a Smart Folder but not indexed (pending, failed or skipped); the message gives its "
        "status and error.",
    )
    UNKNOWN_CHUNK = (
        "unknown_chunk",
        Fault.REJECTED,
        False,
        "indexer (`doc.read.request`), frontdoor",
        "`chunk_id` names no chunk of that file now: the file changed since the search that gave it (a chunk id "
        "lasts until its file changes; search again), or it is another file's chunk.",
    )
    NOT_EMBEDDED = (
        "not_embedded",
        Fault.REJECTED,
        False,
        "indexer (`doc.similar.request`)",
        "The file has no stored vectors yet.",
    )
    FILE_NOT_ANALYZED = (
        "file_not_analyzed",
        Fault.REJECTED,
        False,
        "indexer (`doc.summary.request`)",
        "No analysis is cached for that path (current or original); the message carries a hint.",
    )
    FOLDER_OVERLAP = (
        "folder_overlap",
        Fault.REJECTED,
        False,
        "indexer (`folders.add.request`, `folders.criteria.add.request`)",
        "The folder is already registered, or lies inside or around a registered one; or a criteria folder of "
        "that name exists.",
    )
    UNKNOWN_FOLDER = (
        "unknown_folder",
        Fault.REJECTED,
        False,
        "indexer (`folders.remove.request`, `folders.retry.request`, `folders.documents.request`, "
        "`index.reconcile.request`)",
        "No Smart Folder has that id or registered path (nor, for `folders.remove`, a criteria folder that id or "
        "name).",
    )
    DISK_FULL = (
        "disk_full",
        Fault.FAILED,
        True,
        "indexer (`index.ingest.request`)",
        "A write to the index failed for lack of disk space (ENOSPC); nothing was lost and the files are "
        "indexed once space is free again.",
    )
    INDEX_UNWRITABLE = (
        "index_unwritable",
        Fault.FAILED,
        True,
        "indexer (`index.changes.request`, `index.reconcile.request`, `folders.add.request`)",
        "A write to the index failed for a reason that lasts until someone fixes it (a read-only data folder, no "
        "permission, a folder where an index file belongs); the message names it and the fix, and `status` shows "
        "it until a write goes through. Nothing is lost: the files are indexed once it is fixed.",
    )
    DATABASE_DAMAGED = (
        "database_damaged",
        Fault.FAILED,
        False,
        "indexer (every kind)",
        "The index's SQLite file is damaged (a bad header, overwritten pages: \"database disk image is "
        'malformed"); the indexer writes nothing more. The message names the file and the fix: stop foldermind '
        "and run `foldermind repair`, which keeps the damaged file aside, copies out what it can read and has "
        "the folders indexed again.",
    )

    # The llm worker.
    MODEL_NOT_READY = (
        "model_not_ready",
        Fault.UNAVAILABLE,
        False,
        "llm (`llm.chat.request`, `llm.analyze.request`, `llm.likely.request`), frontdoor",
        "The local model is still loading (then retryable), or could not be loaded; the message gives the "
        "reason (file missing, not a GGUF file, an architecture or tensor type the backend cannot run, ...). A "
        "summary that chats and readings kept from the model until near its deadline, or that its caller's release "
        "stopped: retryable.",
    )
    PROMPT_TOO_LONG = (
        "prompt_too_long",
        Fault.REJECTED,
        False,
        "llm (`llm.chat.request`, `llm.analyze.request`)",
        "Even without sources the question does not fit the model's context window.",
    )
    LLM_TIMEOUT = (
        "llm_timeout",
        Fault.TIMEOUT,
        False,
        "llm (`llm.chat.request`, `llm.likely.request`), frontdoor",
        "The request's deadline passed while generating; the worker stopped the generation itself. (A "
        "generation stuck in native code instead overruns the deadline: the broker answers `deadline_exceeded` "
        "and replaces the worker if it is still busy `bus.overrun_grace_s` later.)",
    )

    # The MCP front door (a tool's failure as its client sees it).
    TOKEN_PERSIST_FAILED = (
        "token_persist_failed",
        Fault.FAILED,
        False,
        "frontdoor (`mcp.token.rotate.request`)",
        "The new token could not be stored; the old one stays stored and in use.",
    )
    INVALID_ARGUMENT = (
        "invalid_argument",
        Fault.REJECTED,
        False,
        "frontdoor",
        "A tool argument broke its schema (the message names the argument and the rule, never the value).",
    )
    UNKNOWN_TOOL = (
        "unknown_tool",
        Fault.REJECTED,
        False,
        "frontdoor",
        "No tool has that name.",
    )
    RESPONSE_TOO_LARGE = (
        "response_too_large",
        Fault.REJECTED,
        False,
        "frontdoor",
        "The tool's result is over `mcp.max_response_mb`; ask for less.",
    )
    RETRIEVAL_FAILED = (
        "retrieval_failed",
        Fault.LOST,
        True,
        "frontdoor (`chat_with_documents`)",
        "The search behind a chat answer failed (its worker unavailable, lost or past its deadline).",
    )
    CHECK_FAILED = (
        "check_failed",
        Fault.LOST,
        True,
        "frontdoor (`chat_with_documents`)",
        "Checking the model's sentences against the passages failed; the quotes answer instead.",
    )
    GENERATION_FAILED = (
        "generation_failed",
        Fault.LOST,
        False,
        "frontdoor (`chat_with_documents`), llm (`llm.likely.request`)",
        "The model's answer failed (its worker lost, an error inside it); the quotes answer instead. From"
        " `llm.likely.request`: the backend gives no log-probabilities (llama-cpp).",
    )

    # The stdio bridge (`foldermind mcp`): a JSON-RPC error its client sees, `{code, retryable}` in its data.
    NOT_RUNNING = (
        "not_running",
        Fault.UNAVAILABLE,
        True,
        "stdio bridge (`foldermind mcp`)",
        "JSON-RPC error -32010: no front door of the home serves (the supervisor stopped, killed or still "
        "starting). The bridge starts the supervisor (one start at a time, at most one every 10 s) and waits "
        "a few seconds before it answers this; when its start failed, the message says why.",
    )
    TOKEN_REFUSED = (
        "token_refused",
        Fault.REJECTED,
        False,
        "stdio bridge (`foldermind mcp`)",
        "JSON-RPC error -32011: the front door refused the bearer token even after the bridge read it again "
        "from the home's token store (the store unreadable, or a front door of another home on that port).",
    )
    CONNECTION_LOST = (
        "connection_lost",
        Fault.LOST,
        True,
        "stdio bridge (`foldermind mcp`)",
        "JSON-RPC error -32012: the connection to the front door broke before the answer came (a restart, a "
        "stop, a kill); the request may or may not have run. Asking again reaches the front door serving then.",
    )
