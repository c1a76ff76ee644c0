"""The whole config (:class:`SupervisorConfig`, one field per table) and :func:`load`, which merges a home's
``config/supervisor.toml`` over the declared defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from foldermind.protocol.runtime.config.env import (
    ACTIVITY_ENV,
    CONSOLE_ENV,
    INGEST_ENV,
    LLM_ENV,
    MCP_ENV,
    SEARCH_ENV,
)
from foldermind.protocol.runtime.config.frontdoor import ActivityPolicy, ConsolePolicy, McpPolicy
from foldermind.protocol.runtime.config.ingest import IngestPolicy
from foldermind.protocol.runtime.config.kernel import BusPolicy, KernelPolicy, RestartPolicy
from foldermind.protocol.runtime.config.llm import LlmPolicy
from foldermind.protocol.runtime.config.search import SearchPolicy
from foldermind.protocol.runtime.config.strict import Strict
from foldermind.protocol.runtime.config.workers import (
    EMBEDDER_MODULE,
    LLM_MODULE,
    MIN_PARSER_MEMORY_MB,
    PARSER_MODULE,
    PROCESS_MAP,
    WorkerSpec,
)


class SupervisorConfig(Strict):
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
