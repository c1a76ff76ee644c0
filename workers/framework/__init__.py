"""The worker framework: what makes a module a worker process (the :class:`~.base.Worker` class, the job loop,
the heartbeat thread, side-by-side jobs, the test switches) and what the HTTP workers share (the bus from an
event loop, uvicorn on a thread). It imports no worker; every worker imports it."""
