"""Supervisor policy: ``supervisor.toml`` (packaged defaults) merged with the home's override."""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BusPolicy(_Strict):
    heartbeat_interval_s: float = Field(1.0, gt=0)
    heartbeat_liveness: int = Field(3, ge=1)
    loading_liveness: int = Field(15, ge=1)
    default_deadline_s: float = Field(30.0, gt=0)
    overrun_grace_s: float = Field(10.0, ge=0)
    max_message_mb: int = Field(64, ge=1)
    tcp_debug_endpoint: str = ""

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
    policy: Literal["always", "on-failure", "never"] = "always"
    backoff_initial_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    backoff_jitter: float = Field(0.2, ge=0, lt=1)
    stable_after_s: float = Field(10.0, ge=0)
    max_restarts: int = Field(5, ge=0)
    window_s: float = Field(60.0, gt=0)
    start_timeout_s: float = Field(30.0, gt=0)
    stop_grace_s: float = Field(5.0, ge=0)


class KernelPolicy(_Strict):
    start_wait_s: float = Field(30.0, gt=0)
    log_max_mb: int = Field(10, ge=1)
    log_backups: int = Field(3, ge=0)


class IngestPolicy(_Strict):
    max_file_size_mb: float = Field(50, gt=0)
    debounce_s: float = Field(0.5, ge=0)
    chunk_max_tokens: int = Field(256, ge=16, le=8192)
    chunk_overlap_tokens: int = Field(32, ge=0)
    parse_timeout_s: float = Field(60.0, gt=0)
    parser_memory_mb: int = Field(2048, ge=0)
    parse_window: int = Field(4, ge=1)
    embed_batch: int = Field(32, ge=1)
    embed_window: int = Field(2, ge=1)
    embed_retry_s: float = Field(30.0, gt=0)
    embed_model_dir: str = ""

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_size_mb * 1024 * 1024)


class SearchPolicy(_Strict):
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(60, ge=1)
    keyword_weight: float = Field(0.5, ge=0, le=1)
    depth_min: int = Field(40, ge=1, le=1000)
    expansion_search: int = Field(256, ge=16, le=4096)
    query_encoder: Literal["local", "embedder"] = "local"
    query_embed_timeout_s: float = Field(3.0, gt=0)
    query_backend: Literal["onnx", "torch"] = "onnx"
    query_threads: int = Field(1, ge=1, le=64)
    query_cache_size: int = Field(256, ge=0, le=100_000)


class McpPolicy(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(53827, ge=0, le=65535)
    path: str = "/mcp"
    max_body_mb: float = Field(5.0, gt=0)
    rate_per_minute: int = Field(60, ge=1)
    allowed_origins: list[str] = Field(default_factory=list)
    tool_deadline_s: float = Field(10.0, gt=0)
    max_response_mb: float = Field(2.0, gt=0)
    session_idle_timeout_s: float = Field(3600.0, gt=0)
    max_sessions: int = Field(100, ge=1)
    request_timeout_s: float = Field(10.0, gt=0)


class LlmPolicy(_Strict):
    backend: Literal["ctransformers", "llama-cpp"] = "ctransformers"
    model_path: str = ""
    context_length: int = Field(2048, ge=256, le=131_072)
    threads: int = Field(0, ge=0, le=256)
    batch_size: int = Field(64, ge=1, le=4096)
    max_answer_tokens: int = Field(96, ge=8, le=8192)
    max_prompt_tokens: int = Field(1280, ge=128, le=131_072)
    temperature: float = Field(0.0, ge=0, le=2)
    repetition_penalty: float = Field(1.1, ge=1, le=2)
    seed: int = 0
    timeout_s: float = Field(60.0, gt=0)
    chunks_per_file: int = Field(2, ge=1, le=10)
    answer_mode: Literal["auto", "extractive", "generative"] = "auto"
    evidence_sources: int = Field(3, ge=1, le=12)
    max_quotes: int = Field(3, ge=1, le=12)
    attribute_uncited: bool = True
    session_ttl_s: float = Field(3600.0, gt=0)
    max_sessions: int = Field(1000, ge=1)
    analysis: bool = True
    analysis_input_tokens: int = Field(384, ge=32, le=8192)
    analysis_max_tokens: int = Field(128, ge=8, le=1024)
    analysis_timeout_s: float = Field(120.0, gt=0)
    analysis_retry_s: float = Field(30.0, gt=0)


INGEST_ENV = "FOLDERMIND_INGEST"
"""Environment variable that carries the [ingest] table (JSON) to every worker."""


SEARCH_ENV = "FOLDERMIND_SEARCH"
MCP_ENV = "FOLDERMIND_MCP"
LLM_ENV = "FOLDERMIND_LLM"


def ingest_from_env() -> IngestPolicy:
    return IngestPolicy.model_validate_json(os.environ.get(INGEST_ENV) or "{}")


def search_from_env() -> SearchPolicy:
    return SearchPolicy.model_validate_json(os.environ.get(SEARCH_ENV) or "{}")


def mcp_from_env() -> McpPolicy:
    return McpPolicy.model_validate_json(os.environ.get(MCP_ENV) or "{}")


def llm_from_env() -> LlmPolicy:
    return LlmPolicy.model_validate_json(os.environ.get(LLM_ENV) or "{}")


class WorkerSpec(_Strict):
    module: str
    count: int = Field(1, ge=1, le=64)
    nice: int = Field(0, ge=0, le=19)
    enabled: bool = True
    env: dict[str, str] = Field(default_factory=dict)
    restart: dict[str, Any] = Field(default_factory=dict)


class SupervisorConfig(_Strict):
    bus: BusPolicy = BusPolicy()
    restart: RestartPolicy = RestartPolicy()
    kernel: KernelPolicy = KernelPolicy()
    ingest: IngestPolicy = IngestPolicy()
    search: SearchPolicy = SearchPolicy()
    mcp: McpPolicy = McpPolicy()
    llm: LlmPolicy = LlmPolicy()
    workers: dict[str, WorkerSpec] = Field(default_factory=dict)

    def restart_policy_for(self, worker: str) -> RestartPolicy:
        """The [restart] table with that worker's own overrides applied."""
        overrides = self.workers[worker].restart
        if not overrides:
            return self.restart
        return RestartPolicy.model_validate({**self.restart.model_dump(), **overrides})

    def ingest_env(self) -> dict[str, str]:
        """The [ingest] policy as environment variables for worker processes."""
        env = {
            INGEST_ENV: self.ingest.model_dump_json(),
            SEARCH_ENV: self.search.model_dump_json(),
            MCP_ENV: self.mcp.model_dump_json(),
            LLM_ENV: self.llm.model_dump_json(),
            "FOLDERMIND_PARSER_MEMORY_MB": str(self.ingest.parser_memory_mb),
        }
        if self.ingest.embed_model_dir:
            env["FOLDERMIND_EMBED_MODEL_DIR"] = self.ingest.embed_model_dir
        return env

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


def default_text() -> str:
    return (resources.files("foldermind.kernel") / "supervisor.toml").read_text(encoding="utf-8")


def load(override: Path | None = None) -> SupervisorConfig:
    """The packaged defaults, with ``override`` (a home's supervisor.toml) merged over them."""
    data = tomllib.loads(default_text())
    if override is not None and override.exists():
        try:
            data = _merge(data, tomllib.loads(override.read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{override}: {exc}") from exc
    try:
        return SupervisorConfig.model_validate(data)
    except ValidationError as exc:
        where = override if override is not None else "supervisor.toml"
        raise ConfigError(f"{where}: {exc}") from exc
