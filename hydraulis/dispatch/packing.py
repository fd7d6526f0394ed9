"""A pipeline's packing (its micro-batches in execution order) and fixed-capacity packing.

**First-fit decreasing** (:func:`first_fit_decreasing`) packs pieces, longest first, each into
the first micro-batch with room, opening a new one when none has: every micro-batch holds at
most ``C`` tokens (a piece longer than ``C`` gets a micro-batch of its own) and the count is at
most ``11/9·OPT + 6/9`` (Dósa 2007). It balances tokens, not time; it is the fixed-capacity
packing of the baselines. Worked example: ``C = 10``, pieces ``(6, 5, 4, 3, 2)`` → ``[6, 4]``,
``[5, 3, 2]``. It finds the first that fits in a tree of rooms (:mod:`hydraulis.base.first_fit`).

**Organ order** (:func:`organ_order`) runs micro-batches smallest last, next smallest first,
and so on inwards, the largest in the middle: under 1F1B the first micro-batch's forward and
the last one's backward are not overlapped by other work, and times that rise and then fall
gently keep the stages busy. Times ``(1, 2, 3, 4, 5)`` run as ``(2, 4, 5, 3, 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.base.first_fit import first_fit_tree


class PackingStatus(str, Enum):
    """How a pipeline's packing was obtained (``solver_status`` in the step plan)."""

    IDLE = "idle"
    """The pipeline received no sequences."""
    PADDED = "padded"
    """Padding baseline: a fixed number of sequences per micro-batch."""
    FIXED_CAPACITY = "fixed_capacity"
    """First-fit decreasing to the pipeline's token capacity."""
    OPTIMAL = "optimal"
    """Provably optimal: a one-stage pipeline with the fewest micro-batches its tokens allow."""
    GREEDY = "greedy"
    """Balanced greedy packing; no integer program was run for it."""
    ILP_OPTIMAL = "ilp_optimal"
    """The integer program proved its answer optimal (among packings into the greedy's number
    of micro-batches, any number on one stage) and that answer beat the greedy one."""
    ILP_FEASIBLE = "ilp_feasible"
    """The integer program ran out of its node budget with an answer better than the greedy one."""
    GREEDY_ILP_OPTIMAL = "greedy_ilp_optimal"
    """The integer program proved that nothing beats the greedy packing (as for ``ilp_optimal``)."""
    GREEDY_ILP_NOT_BETTER = "greedy_ilp_not_better"
    """The integer program ran out of its node budget without beating the greedy packing, which
    was kept; it is not proven optimal."""
    GREEDY_ILP_NO_ANSWER = "greedy_ilp_no_answer"
    """The integer program found no answer within its node budget (or the solver failed); the
    greedy one was kept."""
    ILP_TIME_LIMIT = "ilp_time_limit"
    """The safety time limit stopped the integer program; the better of its answer so far and
    the greedy packing was kept (this one depends on the machine's speed)."""

    @property
    def proven(self) -> bool:
        """Whether the packing is proven optimal (for its micro-batch count on several stages)."""
        return self in (PackingStatus.OPTIMAL, PackingStatus.ILP_OPTIMAL, PackingStatus.GREEDY_ILP_OPTIMAL)


@dataclass(frozen=True)
class Packing:
    """Micro-batches as arrays of piece positions, in execution order, the exact time, how the
    packing was obtained, and a proven lower bound on the time when an integer program gave one."""

    micro_batches: tuple[np.ndarray, ...]
    time_ms: float
    status: PackingStatus
    proven_ms: float | None = None


def first_fit_decreasing(tokens: np.ndarray, capacity: int) -> list[list[int]]:
    """Positions of ``tokens`` (sorted descending) per micro-batch, in opening order."""
    return first_fit_tree(tokens, capacity)


def organ_order(times: np.ndarray) -> np.ndarray:
    """Indices of ``times`` in organ order: ascending ranks 0, 1, 2, 3, … go to positions
    v−1, 0, v−2, 1, … (the smallest last, the largest in the middle)."""
    ranked = np.argsort(times, kind="stable")
    v = ranked.size
    q = np.arange(v)
    slots = np.where(q % 2 == 0, v - 1 - q // 2, q // 2)
    order = np.empty(v, dtype=np.int64)
    order[slots] = ranked
    return order
