"""Entry point of a worker process: ``python -m foldermind.workers MODULE``.

The supervisor starts every worker this way, with its :class:`WorkerContext` in the environment. A stop (SIGTERM) that
comes before the worker's job loop takes signals over (:meth:`~foldermind.workers.framework.runner.Runner.serve`),
while its modules are still imported, finds a process that holds nothing yet: it leaves at once with status 0, a
clean stop, where the default action ended it "killed by signal 15" (a front door started and stopped on a busy
machine spends seconds importing).
"""

from __future__ import annotations

import os
import signal


def _stopped_before_start(signum: int, frame: object) -> None:
    os.write(2, b"stopped before it started\n")
    os._exit(0)


if __name__ == "__main__":  # first: before the imports that take the time
    signal.signal(signal.SIGTERM, _stopped_before_start)

import importlib  # noqa: E402
import sys  # noqa: E402

from foldermind.workers.framework.base import Worker, WorkerContext  # noqa: E402
from foldermind.workers.framework.runner import leave, run  # noqa: E402


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
