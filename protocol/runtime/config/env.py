"""How a worker reads its tables: the kernel passes each one as JSON in an environment variable
(:meth:`~foldermind.protocol.runtime.config.supervisor.SupervisorConfig.ingest_env`), and a worker reads it back
with the matching ``*_from_env`` (the declared defaults when the variable is unset)."""

from __future__ import annotations

import os

from foldermind.protocol.runtime.config.frontdoor import ActivityPolicy, ConsolePolicy, McpPolicy
from foldermind.protocol.runtime.config.ingest import IngestPolicy
from foldermind.protocol.runtime.config.llm import LlmPolicy
from foldermind.protocol.runtime.config.search import SearchPolicy

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
