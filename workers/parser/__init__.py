"""The parser worker (pool member): one file -> chunks with locations, in an expendable process.

``parse.request`` -> ``parse.reply``: the file is read and parsed (:mod:`.formats`), then cut into
chunks that fit the embedding model (:mod:`.chunker`, with that model's own tokenizer, loaded once
on the first job). A file that cannot be parsed is a typed error (``parse_failed``,
``file_too_large``, ``unreadable``) whose message says why.

A parser never opens a path: the indexer opens the file once, checks what it opened
(:mod:`foldermind.workers.userfiles`) and sends its bytes as the request's buffer frame (``content``; bounded
by ``max_bytes``), which are parsed from memory; ``path`` only names the file (its suffix picks the format).
A request without the bytes is answered ``file_content_needed``, on this machine or another.

Hostile files cost at most this process: ``setup()`` caps its address space at
``FOLDERMIND_PARSER_MEMORY_MB`` (its share of ``[ingest] parser_pool_memory_mb``, 0 = no cap), so a
decompression bomb ends in a ``MemoryError`` (answered as ``parse_failed: out of memory: ...``, naming the
cap) or, at worst, a crash the kernel handles by restarting the parser and failing the job with
``worker_lost``. A zip container may inflate to a sixteenth of the cap (:mod:`.formats.container`).

Chunks that do not fit one message go in parts (:mod:`.parts`): ``parse.partial`` replies, then the reply; a
long PDF's pages read go ahead in them while the rest is read (:mod:`.stream`). Each heartbeat carries how far
the parse has got (:mod:`.formats.progress`), so a slow parse is not cut off.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from foldermind.protocol import frames
from foldermind.protocol.errors import ErrorCode, JobError
from foldermind.protocol.messages import ChunkInfo, ParsePartial, ParseReply, ParseRequest, RenderReply, RenderRequest
from foldermind.workers.framework import memory
from foldermind.workers.framework.base import Handler, Request, Result, Worker, WorkerContext, route, testing
from foldermind.workers.parser import parts
from foldermind.workers.parser.chunker import chunk, load_tokenizer
from foldermind.workers.parser.formats import (
    FORMATS,
    SUFFIXES,
    ParsedDocument,
    ParseError,
    ocr,
    parse_content,
    progress,
)
from foldermind.workers.parser.formats.container import inflate_limit_mb, limit_inflation
from foldermind.workers.parser.stream import PageStream

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger("foldermind.parser")

ROLE = "Turns one file into text segments with locations (pool member)."
MEMORY_ENV = "FOLDERMIND_PARSER_MEMORY_MB"
MIN_TOKENS, MAX_TOKENS = 8, 8192


def apply_memory_limit(env: dict[str, str] | None = None) -> int:
    """Cap this process's address space (RLIMIT_AS) at ``FOLDERMIND_PARSER_MEMORY_MB``; returns the
    cap in MiB, 0 when there is none."""
    raw = (os.environ if env is None else env).get(MEMORY_ENV, "").strip()
    try:
        mb = int(raw) if raw else _default_memory_mb()
    except ValueError:
        log.warning("%s=%r is not a number of MiB; using the default", MEMORY_ENV, raw)
        mb = _default_memory_mb()
    if mb <= 0:
        return 0
    try:
        import resource
    except ImportError:  # not a POSIX system
        log.warning("no resource module: the parser runs without a memory cap")
        return 0
    limit = mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY and limit > hard:
        limit = hard
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not cap the parser's memory at %d MiB: %s", mb, exc)
        return 0
    return limit // (1024 * 1024)


def _default_memory_mb() -> int:
    """A parser's share of the default pool budget (the kernel always sets the variable)."""
    from foldermind.protocol.runtime.config import SupervisorConfig

    return SupervisorConfig().parser_memory_mb()


_M_ARENA_MAX = -8  # glibc's mallopt() parameter number


def spare_address_space() -> None:
    """Fewer threads and malloc arenas, so the memory cap goes to the work: OpenBLAS (numpy) and OpenMP start
    one thread per core, and glibc reserves a 64 MiB arena for each thread that allocates: with OCR loaded this
    saves ~300 MiB of address space, so the default cap holds a full page's text detection (docs/tuning.md#parsers).
    Set before
    any of them is imported (they read these variables once)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its arenas are not ours to tune
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)


TRIM_ABOVE = 64 * 1024 * 1024
"""After a parse, freed heap goes back to the system once the parser's RSS has grown this much past what it held
after the last trim. glibc keeps freed memory for reuse: a parser that read scanned pages kept 578 MiB of RSS
through its idle time, ~150 MiB after a trim (docs/tuning.md#parsers), and a trim when nothing grew would cost a
walk of the heap for nothing."""


class ParserWorker(Worker):
    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__(ctx)
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_error = ""
        self.memory_limit_mb = 0
        self.parsed = 0
        self.failed = 0
        self.trims = 0
        self._settled_rss = 0
        self.meter = progress.Meter()

    def setup(self) -> None:
        # One job at a time per process: the pool gives the parallelism, and tokenizer threads would
        # each reserve address space under the cap.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        spare_address_space()
        self.memory_limit_mb = apply_memory_limit()
        limit_inflation(self.memory_limit_mb)
        self._settled_rss = psutil.Process().memory_info().rss
        self.status_note = f"memory cap {self.memory_limit_mb} MiB" if self.memory_limit_mb else "no memory cap"

    def handlers(self) -> dict[str, Handler]:
        return dict(
            [*super().handlers().items(), route(ParseRequest, self.on_parse), route(RenderRequest, self.on_render)]
        )

    def details(self) -> dict[str, Any]:
        if self._tokenizer is not None:
            tokenizer = "loaded"
        else:
            tokenizer = f"failed: {self._tokenizer_error}" if self._tokenizer_error else "not loaded yet"
        return {
            "role": ROLE,
            "formats": list(FORMATS),
            "suffixes": sorted(SUFFIXES),
            "memory_limit_mb": self.memory_limit_mb,
            "inflate_limit_mb": inflate_limit_mb(),
            "tokenizer": tokenizer,
            "ocr": ocr.state(),
            "parsed": self.parsed,
            "failed": self.failed,
            "heap_trims": self.trims,
        }

    def progress(self) -> int:
        return self.meter.read()

    def answered(self, kind: str) -> None:
        """After a parse, the heap it left behind goes back to the system if RSS grew past :data:`TRIM_ABOVE`."""
        if kind != ParseRequest.KIND:
            return
        rss = psutil.Process().memory_info().rss
        if rss - self._settled_rss > TRIM_ABOVE:
            gc.collect()
            memory.trim_heap()
            self.trims += 1
            self._settled_rss = psutil.Process().memory_info().rss
            log.info("heap trimmed after a parse: %d -> %d MiB", rss >> 20, self._settled_rss >> 20)

    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            try:
                self._tokenizer = load_tokenizer(_tokenizer_path())
            except MemoryError:
                raise
            except Exception as exc:
                self._tokenizer_error = str(exc) or exc.__class__.__name__
                message = f"cannot load the tokenizer: {self._tokenizer_error}"
                # Files wait as pending (retried) rather than fail: `status` is where the user sees why.
                self.status_note = f"{message}; files wait"[:300]
                raise JobError(ErrorCode.MODEL_UNAVAILABLE, message) from exc
            self._tokenizer_error = ""
            cap = f"memory cap {self.memory_limit_mb} MiB" if self.memory_limit_mb else "no memory cap"
            self.status_note = f"tokenizer loaded, {cap}"
        return self._tokenizer

    def on_render(self, req: Request[RenderRequest]) -> Result:
        """A PDF page as a PNG for the console's preview (:mod:`.render`; imported here: only a preview needs it)."""
        from foldermind.workers.parser.render import RenderError, render

        body = req.body
        if not Path(body.path).is_absolute() or body.page < 1:
            raise JobError(ErrorCode.BAD_REQUEST, "the path must be absolute and the page 1 or more")
        texts = [t[:500] for t in body.highlight[:50] if t.strip()]
        try:
            png, width, height, pages, marked = render(body.path, body.page, min(body.max_pixels, 8_000_000), texts)
        except RenderError as exc:
            raise JobError(ErrorCode.UNREADABLE, str(exc)) from None
        return RenderReply(body.page, pages, width, height, marked), [png]

    def on_parse(self, req: Request[ParseRequest]) -> Result:
        body = req.body
        path = Path(body.path)
        if not path.is_absolute():
            raise JobError(ErrorCode.BAD_REQUEST, f"path must be absolute: {body.path!r}")
        if not MIN_TOKENS <= body.max_tokens <= MAX_TOKENS:
            raise JobError(
                ErrorCode.BAD_REQUEST, f"max_tokens must be {MIN_TOKENS}..{MAX_TOKENS}, not {body.max_tokens}"
            )
        if body.overlap_tokens < 0 or body.max_bytes <= 0:
            raise JobError(ErrorCode.BAD_REQUEST, "overlap_tokens must be >= 0 and max_bytes > 0")
        content = self._content(req)
        self.meter.begin(_deadline_s(len(content)))  # the tokenizer's first load is the parse's work too
        try:
            doc, chunks = self._parse(path, content, body, req.partial if req.send_partial else None)
        finally:
            self.meter.end()
        # Called in process (no bus, no partials): one reply.
        *first, last = parts.split(chunks, self.ctx.max_message_bytes) if req.send_partial else [chunks]
        for part in first:  # more text than one message carries: the parts before the reply
            req.partial(ParsePartial(part))
        if first:
            log.info("%d chunks sent in %d parts", len(chunks), len(first) + 1)
        self.parsed += 1
        return ParseReply(format=doc.format, chunks=last, title=doc.title, pages=doc.pages)

    def _parse(
        self, path: Path, content: bytes, body: ParseRequest, send: Callable[[ParsePartial], None] | None
    ) -> tuple[ParsedDocument, list[ChunkInfo]]:
        """The file's document and its chunks not yet sent (``send``: pages read go ahead of the reply,
        :mod:`.stream`), or the job's typed error."""
        tokenizer = self.tokenizer()
        _hold(path, after=False)
        try:
            if send is None:
                doc = parse_content(path, content, body.max_bytes, body.format)
                chunks = chunk(doc.segments, tokenizer, body.max_tokens, body.overlap_tokens)
            else:

                def ahead(part: ParsePartial) -> None:
                    send(part)
                    _hold(path, after=True, pages=True)

                pages = PageStream(ahead, tokenizer, body.max_tokens, body.overlap_tokens, self.ctx.max_message_bytes)
                with progress.streaming(pages.offer):
                    doc = parse_content(path, content, body.max_bytes, body.format)
                chunks = pages.finish(doc.segments)
        except ParseError as exc:
            self.failed += 1
            raise JobError(exc.code, exc.message) from None
        except MemoryError:
            self.failed += 1
            gc.collect()
            raise JobError(ErrorCode.PARSE_FAILED, self._out_of_memory()) from None
        except RecursionError:
            self.failed += 1
            raise JobError(ErrorCode.PARSE_FAILED, "document nested too deeply") from None
        except Exception as exc:
            # A library choking on a hostile file: the traceback stays in this worker's log, the
            # document is recorded as failed with a reason.
            log.exception("parsing %s failed", path.suffix or "a file")
            self.failed += 1
            raise JobError(ErrorCode.PARSE_FAILED, f"parser error: {exc.__class__.__name__}") from None
        finally:
            _hold(path, after=True)  # whatever the outcome, before it goes out
        return doc, chunks

    def _out_of_memory(self) -> str:
        if not self.memory_limit_mb:
            return "out of memory"
        return (
            f"out of memory: the file needs more than this parser's {self.memory_limit_mb} MiB"
            " (its share of [ingest] parser_pool_memory_mb)"
        )

    def _content(self, req: Request[ParseRequest]) -> bytes:
        """The file's bytes, which the request carries. A path is never opened here: between the indexer's look at
        it and this parse it could have become a link out of every Smart Folder, and on another machine
        (``worker run --connect``) the same path would be some other file or none."""
        if not req.body.content:
            raise JobError(ErrorCode.FILE_CONTENT_NEEDED, "a parser reads no path: send the file's bytes")
        if len(req.buffers) != 1:
            raise JobError(ErrorCode.BAD_REQUEST, f"content needs one buffer frame, not {len(req.buffers)}")
        data = frames.buffer_bytes(req.buffers[0])
        if len(data) > req.body.max_bytes:
            raise JobError(
                ErrorCode.FILE_TOO_LARGE, f"file too large: {len(data)} bytes (the limit is {req.body.max_bytes})"
            )
        return bytes(data)


def _hold(path: Path, after: bool, pages: bool = False) -> None:
    """A test switch's hold of this parse (:func:`foldermind.workers.framework.faults.parser_hold`); nothing in a
    normal run."""
    if testing():
        from foldermind.workers.framework import faults

        faults.parser_hold(path, after, pages)


def _deadline_s(size: int) -> float:
    """The parse's deadline ([ingest] parse_timeout_s plus 2 s per MB): CPU that long without a step is still
    progress (:mod:`.formats.progress`)."""
    from foldermind.protocol.runtime.config import ingest_from_env

    try:
        return ingest_from_env().parse_deadline_s(size)
    except Exception:  # a malformed FOLDERMIND_INGEST: the default
        from foldermind.protocol.runtime.config import IngestPolicy

        return IngestPolicy().parse_deadline_s(size)


def _tokenizer_path() -> Path:
    """The tokenizer of the configured embedding model ([ingest] embed_model_dir), else the bundled one."""
    from foldermind.workers.embedding.model_files import tokenizer_file

    configured: str | None = None
    try:
        from foldermind.protocol.runtime.config import ingest_from_env

        configured = ingest_from_env().embed_model_dir or None
    except Exception as exc:  # a malformed FOLDERMIND_INGEST: the default model still works
        log.warning("ignoring the [ingest] settings: %s", exc)
    return tokenizer_file(configured)


WORKER = ParserWorker
