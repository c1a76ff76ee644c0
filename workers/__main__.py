"""Entry point of a worker process: ``python -m foldermind.workers MODULE``.

The supervisor starts every worker this way, with its :class:`WorkerContext` in the environment.
"""

from __future__ import annotations

import importlib
import sys

from foldermind.workers.framework.base import Worker, WorkerContext
from foldermind.workers.framework.runner import leave, run


def load_worker_class(module_name: str) -> type[Worker]:
    module = importlib.import_module(module_name)
    worker_cls = getattr(module, "WORKER", None)
    if not (isinstance(worker_cls, type) and issubclass(worker_cls, Worker)):
        raise SystemExit(f"{module_name} defines no WORKER class")
    return worker_cls


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m foldermind.workers MODULE")
    return run(load_worker_class(args[0]), WorkerContext.from_env())


if __name__ == "__main__":
    leave(main())
