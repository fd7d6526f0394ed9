"""Planning work in a bounded pool of worker processes, with admission control (design §11).

**Admission.** At most ``workers + queue`` requests are admitted at once (:meth:`WorkerPool.admit`,
called by the admission middleware before the body is read); the next one is answered 503 at
once, with ``Retry-After`` (:meth:`WorkerPool.retry_after_s`): the time the admitted requests
need at the recent mean service time, at least 1 s. An admitted request waits, first come first
served, for an idle worker.

**Deadline.** A request's deadline starts when a worker starts on it, not while it waits. A
worker still busy at the deadline is killed and replaced by a fresh process, and the request is
answered 504: work past its deadline is cancelled, not abandoned in a thread that keeps a core
busy. The same happens when the client goes away while its work runs (the route cancels
:meth:`WorkerPool.run`, :func:`hydraulis.service.app.planning`). A worker that dies (out of
memory, a crash) is replaced and its request answered 500.

The details: :class:`WorkerPool`."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from hydraulis.base.errors import HydraulisError
from hydraulis.service.errors import ServiceError

logger = logging.getLogger(__name__)

PRELOAD = ["hydraulis.service.work"]
"""Modules the fork server imports once, so that every worker starts with them loaded."""


class Outcome:
    """What a worker answers: the result, bad input, a service error, or an internal failure."""

    OK = "ok"
    INVALID = "invalid"
    SERVICE = "service"
    INTERNAL = "internal"


def _worker_main(connection: Connection, folder: str) -> None:
    """The worker process: run each job it receives until the pipe closes, in a process group of
    its own (its solver children join it), its temporary files in ``folder``."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    while True:
        try:
            function, body, settings = connection.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple = (Outcome.OK, json.dumps(function(body, settings), allow_nan=False).encode())
        except HydraulisError as error:
            answer = (Outcome.INVALID, error.field, str(error))
        except ServiceError as error:
            answer = (Outcome.SERVICE, error.status, error.code, error.message, error.field)
        except MemoryError:
            answer = (Outcome.SERVICE, 413, "too_much_work", "the request needs more memory than a worker has",
                      None)
        except Exception as error:  # reported to the client as 500 and logged by the service
            answer = (Outcome.INTERNAL, f"{type(error).__name__}: {error}"[:500])
        connection.send(answer)


class _Worker:
    """One worker process and the service's end of its pipe."""

    def __init__(self, context: multiprocessing.context.BaseContext) -> None:
        self.connection, child = context.Pipe(duplex=True)
        self.folder = tempfile.mkdtemp(prefix="hydraulis-worker-")
        self.process = context.Process(target=_worker_main, args=(child, self.folder), daemon=True,
                                       name="hydraulis-worker")
        self.process.start()
        child.close()

    def stop(self) -> None:
        """End the worker and every process of its group (its solvers); remove its folder."""
        self.connection.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # the group is gone (or never formed)
            self.process.kill()
        self.process.join(timeout=5)
        shutil.rmtree(self.folder, ignore_errors=True)

    def cause(self) -> str:
        """How the worker ended: its exit status or the signal that ended it."""
        self.process.join(timeout=1)
        code = self.process.exitcode
        if code is None:
            return "it closed its pipe"
        return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


class WorkerPool:
    """``workers`` worker processes and room for ``queue`` requests waiting for one.

    **Processes.** Workers are forked from a fork server that has imported the planning code once
    (:mod:`hydraulis.service.work`), so a replacement starts in milliseconds (where the platform has
    no fork server, they are spawned). Each worker leads a process group of its own, and a worker is
    stopped by killing its group: the solver it started (CBC runs as a child process) ends with it,
    also when the worker itself died first. Each worker has a temporary folder of its own (its
    ``TMPDIR``, where the solvers write their model files), removed once the worker is stopped. A
    worker that dies is logged with its exit status or signal. Each talks to the service over a pipe: ``(function, body, settings)`` in, ``(outcome, …)`` out, where ``function``
    is a module-level function (pickled by name) whose JSON value the worker encodes.

    Worked example: 2 workers and a queue of 8 admit 10 requests; the 11th gets 503 with
    ``Retry-After: 1`` when the mean service time is 0.2 s (``⌈10 · 0.2 / 2⌉ = 1``).
    """

    def __init__(self, workers: int, queue: int) -> None:
        self.workers, self.queue = workers, queue
        self.admitted = 0
        self.mean_service_s = 0.1
        methods = multiprocessing.get_all_start_methods()
        self._context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        self._idle: asyncio.Queue[_Worker] | None = None
        self._all: list[_Worker] = []

    # admission -------------------------------------------------------------------------------

    def admit(self) -> bool:
        """Take a place for one request; False when ``workers + queue`` are taken."""
        if self.admitted >= self.workers + self.queue:
            return False
        self.admitted += 1
        return True

    def release(self) -> None:
        self.admitted -= 1

    def retry_after_s(self) -> int:
        """Seconds until the admitted requests are likely served: ``⌈admitted · mean / workers⌉ ≥ 1``."""
        return max(1, math.ceil(self.admitted * self.mean_service_s / self.workers))

    # work ------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the workers (once; later calls return at once)."""
        if self._idle is not None:
            return
        self._idle = asyncio.Queue()
        if self._context.get_start_method() == "forkserver":
            self._context.set_forkserver_preload(PRELOAD)
        loop = asyncio.get_running_loop()
        for _ in range(self.workers):
            worker = await loop.run_in_executor(None, _Worker, self._context)
            self._all.append(worker)
            self._idle.put_nowait(worker)

    async def run(self, function: Callable[[Any, Any], Any], body: Any, settings: Any, deadline_s: float) -> Any:
        """``function(body, settings)`` in a worker; its deadline runs from when the worker starts.

        Raises :class:`ServiceError`: 422 for bad input (the :class:`HydraulisError`'s field and
        message), 504 past the deadline, 500 when the worker died or failed, or the work's own."""
        await self.start()
        worker = await self._idle.get()
        started = time.perf_counter()
        keep = False
        try:
            worker.connection.send((function, body, settings))
            await asyncio.wait_for(_readable(worker.connection), timeout=deadline_s)
            answer = worker.connection.recv()
            keep = True
        except asyncio.TimeoutError:
            raise ServiceError(504, "deadline_exceeded", f"planning exceeded its deadline of {deadline_s:g} s "
                                                         f"and was stopped", "time_limit_s") from None
        except (EOFError, OSError, BrokenPipeError):
            logger.error("planning worker %d died (%s) while running %s", worker.process.pid, worker.cause(),
                         getattr(function, "__name__", function))
            raise ServiceError(500, "worker_failed", "the planning worker died; see the service log") from None
        finally:
            self._give_back(worker, keep)
            elapsed = time.perf_counter() - started
            self.mean_service_s = 0.9 * self.mean_service_s + 0.1 * elapsed
        return _result(answer)

    def _give_back(self, worker: _Worker, healthy: bool) -> None:
        if not healthy:
            self._all.remove(worker)
            worker.stop()
            worker = _Worker(self._context)
            self._all.append(worker)
        self._idle.put_nowait(worker)

    def stats(self) -> dict[str, int]:
        """Workers, queue places and the requests admitted now (for readiness)."""
        return {"workers": self.workers, "queue": self.queue, "admitted": self.admitted}

    def close(self) -> None:
        """Stop every worker."""
        for worker in self._all:
            worker.stop()
        self._all.clear()
        self._idle = None


def _result(answer: tuple) -> Any:
    outcome, *rest = answer
    if outcome == Outcome.OK:
        return rest[0]
    if outcome == Outcome.INVALID:
        field, message = rest
        raise ServiceError(422, "invalid_input", message, field)
    if outcome == Outcome.SERVICE:
        raise ServiceError(*rest)
    logger.error("planning worker failed: %s", rest[0])
    raise ServiceError(500, "internal", "internal error; see the service log")


async def _readable(connection: Connection) -> None:
    """Wait until ``connection`` has data (or is closed) without blocking the event loop."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    descriptor = connection.fileno()
    loop.add_reader(descriptor, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(descriptor)
        os.set_blocking(descriptor, True)  # uvloop's add_reader made it non-blocking: recv() reads a long answer whole
