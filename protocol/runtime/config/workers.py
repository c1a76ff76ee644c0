"""The process map: which workers run, each as its own OS process ([workers.NAME]), and the default map."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from foldermind.protocol.runtime.config.strict import Strict


class WorkerSpec(Strict):
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
