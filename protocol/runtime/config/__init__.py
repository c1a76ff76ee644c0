"""Supervisor policy: every knob the kernel and its workers apply, declared once here with its default and
its help; a home's ``config/supervisor.toml`` overrides any of them.

The top-level ``supervisor.toml`` (shipped in the package as ``foldermind/protocol/runtime/supervisor.toml``) is this
package rendered as annotated TOML by :mod:`foldermind.protocol.runtime.defaults` (``foldermind config defaults``
prints it); a test fails when the committed file is not the rendering, so the two cannot disagree.

One module per part of the file, each table a pydantic model (:class:`~.strict.Strict`: unknown keys are errors):
:mod:`.kernel` ([bus], [restart], [kernel]), :mod:`.ingest`, :mod:`.search`, :mod:`.frontdoor` ([mcp], [console],
[activity]), :mod:`.llm` and :mod:`.workers` (the process map); :mod:`.supervisor` puts them together and loads a
home's file, and :mod:`.env` is how a worker reads its tables. The names are re-exported here, so a caller imports
from one place.
"""

from foldermind.protocol.runtime.config.env import (
    ACTIVITY_ENV,
    CONSOLE_ENV,
    INGEST_ENV,
    LLM_ENV,
    MCP_ENV,
    SEARCH_ENV,
    activity_from_env,
    console_from_env,
    ingest_from_env,
    llm_from_env,
    mcp_from_env,
    search_from_env,
)
from foldermind.protocol.runtime.config.frontdoor import ActivityPolicy, ConsolePolicy, McpPolicy
from foldermind.protocol.runtime.config.ingest import IngestPolicy
from foldermind.protocol.runtime.config.kernel import (
    WILDCARD_HOSTS,
    BusPolicy,
    KernelPolicy,
    RestartPolicy,
    split_host_port,
)
from foldermind.protocol.runtime.config.llm import LlmPolicy, QuestionShape
from foldermind.protocol.runtime.config.search import SearchPolicy
from foldermind.protocol.runtime.config.supervisor import RENAMED, ConfigError, SupervisorConfig, load
from foldermind.protocol.runtime.config.workers import (
    EMBEDDER_MODULE,
    LLM_MODULE,
    MIN_PARSER_MEMORY_MB,
    PARSER_MODULE,
    PROCESS_MAP,
    WORKER_HELP,
    WorkerSpec,
)

__all__ = [
    "ACTIVITY_ENV",
    "CONSOLE_ENV",
    "EMBEDDER_MODULE",
    "INGEST_ENV",
    "LLM_ENV",
    "LLM_MODULE",
    "MCP_ENV",
    "MIN_PARSER_MEMORY_MB",
    "PARSER_MODULE",
    "PROCESS_MAP",
    "RENAMED",
    "SEARCH_ENV",
    "WILDCARD_HOSTS",
    "WORKER_HELP",
    "ActivityPolicy",
    "BusPolicy",
    "ConfigError",
    "ConsolePolicy",
    "IngestPolicy",
    "KernelPolicy",
    "LlmPolicy",
    "McpPolicy",
    "QuestionShape",
    "RestartPolicy",
    "SearchPolicy",
    "SupervisorConfig",
    "WorkerSpec",
    "activity_from_env",
    "console_from_env",
    "ingest_from_env",
    "llm_from_env",
    "load",
    "mcp_from_env",
    "search_from_env",
    "split_host_port",
]
