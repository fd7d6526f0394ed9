"""The 1F1B order of one pipeline stage (PipeDream-Flush; Narayanan et al. 2021): the one order
the runtime executes, the cost model prices (:mod:`hydraulis.cost.pipeline`) and the fused
baselines queue (:mod:`hydraulis.fused.baselines`).

Stage ``s`` of ``S`` with ``m`` micro-batches runs ``w = min(S − 1 − s, m)`` warm-up forwards,
then ``F_w, B_0, F_{w+1}, B_1, …``, then the remaining backwards. As positions in that order:
``F_j ↦ j`` for ``j < w``, else ``w + 2(j − w)``; ``B_j ↦ w + 2j + 1`` for ``j < m − w``, else
``m + j``. Example ``S = 2, s = 0, m = 3``: ``w = 1``, ``F0 F1 B0 F2 B1 B2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np


class Phase(str, Enum):
    """A micro-batch's forward or backward on one stage."""

    FORWARD = "F"
    BACKWARD = "B"


@dataclass(frozen=True)
class Operation:
    """One step of a stage's schedule: the ``phase`` of micro-batch ``micro_batch``."""

    phase: Phase
    micro_batch: int

    def __str__(self) -> str:
        return f"{self.phase.value}{self.micro_batch}"


def one_f_one_b_position(stage, stages, micro_batches, micro_batch, forward):
    """The position of an operation in its stage's 1F1B order (module docstring), element-wise
    over integers or NumPy arrays: ``forward`` True for ``F_j``, False for ``B_j``."""
    w = np.minimum(stages - 1 - stage, micro_batches)
    j = micro_batch
    forward_position = np.where(j < w, j, w + 2 * (j - w))
    backward_position = np.where(j < micro_batches - w, w + 2 * j + 1, micro_batches + j)
    return np.where(forward, forward_position, backward_position)


def one_f_one_b(micro_batches: int, pp: int, stage: int) -> tuple[Operation, ...]:
    """The operations of ``stage`` of ``pp`` over ``micro_batches``, in 1F1B order."""
    j = np.tile(np.arange(micro_batches), 2)
    forward = np.repeat([True, False], micro_batches)
    order = np.argsort(one_f_one_b_position(stage, pp, micro_batches, j, forward), kind="stable")
    return tuple(Operation(Phase.FORWARD if forward[k] else Phase.BACKWARD, int(j[k])) for k in order)
