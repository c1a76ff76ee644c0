"""[ingest]: watching, parsing, chunking and embedding files."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from foldermind.protocol.runtime.config.strict import Strict


class IngestPolicy(Strict):
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
