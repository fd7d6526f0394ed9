"""Which rank stopped: heartbeats in the rendezvous store.

A collective that times out, or a connection a peer closed, tells a rank only that *some* peer
failed to answer — usually naming itself or a neighbour, not the rank that stopped. So every
rank runs a daemon thread that adds 1 to its counter ``heartbeat/RANK`` in the job's store every
:data:`INTERVAL_S`. A rank whose job fails reads every counter, waits ``2 × INTERVAL_S`` and
reads them again (:meth:`Heartbeat.silent_ranks`): the ranks whose counters did not move are
stopped (``SIGSTOP``, a hung process whose threads are all blocked), dead or already gone. The
failure's message then names them first (:mod:`hydraulis.runtime.launch`).

Counters, not clock times, so nodes with skewed clocks agree. Worked example: with
``--timeout-s 5`` and rank 1 stopped, rank 0's collective fails after 5 s, its check takes 2 s
and it ends with ``rank 1 stopped responding (its heartbeat did not move in 2 s); rank 0 saw:
… timed out``; the launcher then ends the stopped rank with ``SIGKILL`` (within another 4 s), so
the job ends in about ``timeout_s + 6`` s.
"""

from __future__ import annotations

import logging
import threading
import time

import torch.distributed as dist

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
"""Seconds between a rank's heartbeats."""


class Heartbeat:
    """This rank's heartbeat thread and the reading of every rank's counter."""

    def __init__(self, store: dist.Store, rank: int, world_size: int, interval_s: float = INTERVAL_S) -> None:
        self.store, self.rank, self.world_size, self.interval_s = store, rank, world_size, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self.store.add(self._key(self.rank), 1)
            except Exception:  # the store's host is gone: the job is ending anyway
                return
            self._stop.wait(self.interval_s)

    def silent_ranks(self) -> list[int]:
        """The other ranks whose counters did not move in ``2 × interval_s`` (empty when the
        store cannot be read)."""
        try:
            before = self._counters()
            time.sleep(2 * self.interval_s)
            after = self._counters()
        except Exception as error:  # the store's host stopped or went away: nothing to learn
            log.debug("heartbeats unreadable: %s", error)
            return []
        return [rank for rank in range(self.world_size) if rank != self.rank and after[rank] == before[rank]]

    def stop(self) -> None:
        self._stop.set()

    def _counters(self) -> list[int]:
        return [self.store.add(self._key(rank), 0) for rank in range(self.world_size)]

    @staticmethod
    def _key(rank: int) -> str:
        return f"heartbeat/{rank}"
