"""Which rank stopped: heartbeats in the rendezvous store and, for a local job, in files the
launcher watches.

A collective that times out, or a connection a peer closed, tells a rank only that *some* peer
failed to answer — usually naming itself or a neighbour, not the rank that stopped. So every
rank runs a daemon thread that, every :data:`INTERVAL_S`, adds 1 to its counter
``heartbeat/RANK`` in the job's store and sets ``step/RANK`` to its last completed step
(:meth:`Heartbeat.completed`); in a local job it also rewrites ``FOLDER/RANK`` (that step) in
the launcher's folder. A rank whose job fails reads every counter, waits ``2 × INTERVAL_S`` and
reads them again (:meth:`Heartbeat.silent_ranks`): the ranks whose counters did not move are
stopped (``SIGSTOP``), dead or gone, and the failure names them first. The local launcher does
not wait for that: :class:`HeartbeatWatch` ends the job once a rank's file is older than the
job's ``timeout_s`` — rank 0 too, whose peers' collectives may not have failed yet.

Worked example: ``--timeout-s 5``, rank 0 stopped after step 3: its file stops changing; 5 s
later the launcher kills every rank and reports ``rank 0 stopped responding: no heartbeat in 5 s
(last completed step 3)``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import torch.distributed as dist

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
"""Seconds between a rank's heartbeats."""
NO_STEP = -1
"""The last completed step of a rank that has completed none."""
READ_LIMIT_S = 5.0
"""Seconds a failing rank waits for the store's answers beyond the ``2 × INTERVAL_S`` of its check."""


class Heartbeat:
    """This rank's heartbeat thread and the reading of every rank's counter; ``folder``: where
    the local launcher watches the ranks' files (None under torchrun)."""

    def __init__(self, store: dist.Store, rank: int, world_size: int, interval_s: float = INTERVAL_S,
                 folder: str | None = None) -> None:
        self.store, self.rank, self.world_size, self.interval_s = store, rank, world_size, interval_s
        self.file = Path(folder) / str(rank) if folder else None
        self.step = NO_STEP
        self._published = None
        self._stop, self._wake = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._thread.start()

    def completed(self, step: int) -> None:
        """Record that this rank completed ``step``: its file says so at once, the store as soon
        as the thread wakes."""
        self.step = step
        if self.file is not None:
            write_beat(self.file, step)
        self._wake.set()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                step = self.step
                if step != self._published:
                    self.store.set(_step_key(self.rank), str(step))
                    self._published = step
                self.store.add(_counter_key(self.rank), 1)
                if self.file is not None:
                    write_beat(self.file, step)
            except Exception:  # the store's host or the launcher's folder is gone: the job is ending anyway
                return
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def silent_ranks(self) -> dict[int, int] | None:
        """The other ranks whose counters did not move in ``2 × interval_s``, each with its last
        completed step; None when the store does not answer within :data:`READ_LIMIT_S` more (its
        host stopped: a TCP store's reads wait for a stopped host without end, so they run in a
        thread this one stops waiting for)."""
        found: list[dict[int, int]] = []
        reader = threading.Thread(target=lambda: found.append(self._silent()), name="heartbeat-read", daemon=True)
        reader.start()
        reader.join(timeout=2 * self.interval_s + READ_LIMIT_S)
        return found[0] if found else None

    def _silent(self) -> dict[int, int]:
        try:
            before = self._counters()
            time.sleep(2 * self.interval_s)
            after = self._counters()
            silent = [rank for rank in range(self.world_size) if rank != self.rank and after[rank] == before[rank]]
            return {rank: self._last_step(rank) for rank in silent}
        except (RuntimeError, ValueError) as error:  # the store's host went away (DistStoreError): no answer
            log.debug("heartbeats unreadable: %s", error)
            raise

    def _last_step(self, rank: int) -> int:
        return int(self.store.get(_step_key(rank))) if self.store.check([_step_key(rank)]) else NO_STEP

    def stop(self) -> None:
        """End the thread; the rank is done, so the launcher stops watching it."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2 * self.interval_s)
        if self.file is not None:
            self.file.unlink(missing_ok=True)

    def _counters(self) -> list[int]:
        return [self.store.add(_counter_key(rank), 0) for rank in range(self.world_size)]


class HeartbeatWatch:
    """The local launcher's view of the ranks' heartbeat files in ``folder``: a rank whose file
    is older than ``limit_s`` stopped responding (a rank not started yet, or done, has none)."""

    def __init__(self, folder: str | Path, world_size: int, limit_s: float) -> None:
        self.folder, self.world_size, self.limit_s = Path(folder), world_size, limit_s

    def silent(self) -> dict[int, tuple[float, int]]:
        """Each silent rank's ``(seconds since its last beat, last completed step)``."""
        now, silent = time.time(), {}
        for rank in range(self.world_size):
            try:
                age = now - (self.folder / str(rank)).stat().st_mtime
                if age > self.limit_s:
                    silent[rank] = (age, _read_beat(self.folder / str(rank)))
            except OSError:  # no file: not started, or done
                continue
        return silent

    def last_step(self, rank: int) -> int:
        """The last step ``rank``'s file reports completed (:data:`NO_STEP` when it has none)."""
        return _read_beat(self.folder / str(rank))

    @staticmethod
    def describe(silent: dict[int, tuple[float, int]]) -> str:
        """``rank 0 stopped responding: no heartbeat in 5.2 s (last completed step 3)``, one
        clause per silent rank."""
        return "; ".join(f"rank {rank} stopped responding: no heartbeat in {age:.1f} s ({describe_step(step)})"
                         for rank, (age, step) in sorted(silent.items()))


def describe_step(step: int) -> str:
    """``last completed step 3``, or ``no step completed``."""
    return "no step completed" if step == NO_STEP else f"last completed step {step}"


def write_beat(path: Path, step: int) -> None:
    """Replace the heartbeat file ``path`` with ``step``, whole (a reader never sees half of it)."""
    temporary = path.with_name(f".{path.name}.{threading.get_ident()}")
    temporary.write_text(str(step), encoding="ascii")
    os.replace(temporary, path)


def _read_beat(path: Path) -> int:
    try:
        return int(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return NO_STEP


def _counter_key(rank: int) -> str:
    return f"heartbeat/{rank}"


def _step_key(rank: int) -> str:
    return f"step/{rank}"
