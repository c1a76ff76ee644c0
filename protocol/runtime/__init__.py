"""The runtime contract every foldermind process shares, one layer above the wire (:mod:`foldermind.protocol`):
the declared config (:mod:`.config`, rendered as supervisor.toml by :mod:`.defaults`), a home's layout
(:mod:`.home`), the context a worker is spawned with (:mod:`.context`), logging (:mod:`.logs`) and the MCP
token store (:mod:`.token_store`).

The kernel, every worker and the CLI import from here; nothing here imports them, and the wire modules beside
it do not import it (the import contracts in pyproject.toml, checked by ``make test``).
"""
