"""Jobs answered side by side: the kinds a worker marks :attr:`~foldermind.workers.framework.base.Worker.side_by_side`
run on a few threads beside the job thread, so one slow request does not hold the others.

The job socket stays the job thread's own (a ZeroMQ socket is not thread-safe): a handler that ends on a
side thread leaves what sends its reply in a queue and rings the job loop's wake-up pipe, and the job
thread sends it. A partial reply takes the same way. Only handlers that are safe beside each other and
beside the job thread may be marked: the indexer's searches, which read SQLite through a connection per
thread, Tantivy through a searcher per search and usearch under a readers' lock.
"""

from __future__ import annotations

import queue
from collections.abc import Callable

Send = Callable[[], None]
"""What sends a job's reply (or a partial reply): called on the job thread."""


class SidePool:
    def __init__(self, threads: int, wake: Callable[[], None]) -> None:
        # Imported here: only a worker with side-by-side kinds (the indexer) makes a pool, and every worker
        # imports this module with its framework (concurrent.futures: ~8 ms CPU of each one's start).
        from concurrent.futures import ThreadPoolExecutor

        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="side")
        self._sends: queue.SimpleQueue[Send] = queue.SimpleQueue()
        self._wake = wake

    def submit(self, job: Callable[[], Send]) -> None:
        """Run ``job`` on a side thread; the :data:`Send` it returns goes out with :meth:`send_ready`."""
        self._threads.submit(lambda: self.post(job()))

    def post(self, send: Send) -> None:
        """Queue ``send`` for the job thread (from any thread)."""
        self._sends.put(send)
        self._wake()

    def send_ready(self) -> None:
        """On the job thread: send everything the side threads have finished."""
        while True:
            try:
                send = self._sends.get_nowait()
            except queue.Empty:
                return
            send()

    def finish(self) -> None:
        """On the job thread, stopping: let the jobs in hand end, then send their replies."""
        self._threads.shutdown(wait=True)
        self.send_ready()
