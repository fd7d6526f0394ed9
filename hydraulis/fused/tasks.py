"""The tasks of a fused problem as flat arrays, the form the simulator and the search use.

Task ``t`` of model ``k``, replica ``r``, micro-batch ``j`` at chain position ``c`` (``c < S``:
forward of stage ``c``; ``c ≥ S``: backward of stage ``2S − 1 − c``) has index
``offset_k + (Σ_{r' < r} m_{r'} + j)·2S + c``; its chain predecessor is ``t − 1`` (none at
``c = 0``) and its successor ``t + 1`` (none at ``c = 2S − 1``).

An *order* is one int array of length ``T`` (all tasks): device ``d``'s tasks, in execution
order, fill ``order[device_start[d]:device_start[d + 1]]``. ``position[t]`` is the inverse.

Worked example: one model, ``S = 2``, ``R = 1``, ``m = 1``: tasks 0..3 are ``F_0, F_1, B_1,
B_0``; forward placement puts tasks 0 and 3 on device 0, tasks 1 and 2 on device 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydraulis.cost.order import Phase
from hydraulis.fused.problem import FusedProblem


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """Per task: ``model``, ``replica``, ``micro_batch``, ``stage``, ``forward`` (bool),
    ``device``, ``duration`` (ms), ``memory`` (held from the forward's start on this device to
    the backward's end), ``chain_prev``/``chain_next`` (−1 for none); ``device_start`` (N + 1)
    delimits each device's slice of an order; ``device_tasks`` lists each device's tasks (a
    valid slicing, not a valid order)."""

    devices: int
    model: np.ndarray
    replica: np.ndarray
    micro_batch: np.ndarray
    stage: np.ndarray
    forward: np.ndarray
    device: np.ndarray
    duration: np.ndarray
    memory: np.ndarray
    chain_prev: np.ndarray
    chain_next: np.ndarray
    device_start: np.ndarray
    device_tasks: np.ndarray

    @property
    def size(self) -> int:
        return int(self.duration.size)

    def phase(self, task: int) -> Phase:
        return Phase.FORWARD if self.forward[task] else Phase.BACKWARD

    def positions(self, order: np.ndarray) -> np.ndarray:
        """``position[t]``: where task ``t`` sits in ``order``."""
        position = np.empty(order.size, dtype=np.int64)
        position[order] = np.arange(order.size)
        return position

    def device_order(self, order: np.ndarray, device: int) -> np.ndarray:
        return order[self.device_start[device]:self.device_start[device + 1]]


def task_graph(problem: FusedProblem) -> TaskGraph:
    """Build the arrays of :class:`TaskGraph` for ``problem``."""
    columns: dict[str, list[np.ndarray]] = {k: [] for k in
                                            ("model", "replica", "micro_batch", "stage", "forward", "device",
                                             "duration", "memory", "first", "last")}
    for k, model in enumerate(problem.models):
        chain = 2 * model.stages
        position = np.arange(chain)
        forward = position < model.stages
        stage = np.where(forward, position, chain - 1 - position)
        for r in range(model.replicas):
            m = model.micro_batches[r]
            device = np.array([model.device(r, int(s)) for s in stage])
            f = np.asarray(model.forward_ms[r], dtype=np.float64)
            b = np.asarray(model.backward_ms[r], dtype=np.float64)
            columns["model"].append(np.full(m * chain, k))
            columns["replica"].append(np.full(m * chain, r))
            columns["micro_batch"].append(np.repeat(np.arange(m), chain))
            columns["stage"].append(np.tile(stage, m))
            columns["forward"].append(np.tile(forward, m))
            columns["device"].append(np.tile(device, m))
            columns["duration"].append(np.where(forward[None, :], f[:, None], b[:, None]).ravel())
            columns["memory"].append(np.repeat(np.asarray(model.memory_per_micro_batch[r], dtype=np.float64), chain))
            columns["first"].append(np.tile(position == 0, m))
            columns["last"].append(np.tile(position == chain - 1, m))
    arrays = {k: np.concatenate(v) for k, v in columns.items()}
    n = arrays["duration"].size
    index = np.arange(n, dtype=np.int64)
    chain_prev = np.where(arrays["first"], -1, index - 1)
    chain_next = np.where(arrays["last"], -1, index + 1)
    device = arrays["device"].astype(np.int64)
    device_tasks = np.argsort(device, kind="stable").astype(np.int64)
    device_start = np.searchsorted(device[device_tasks], np.arange(problem.devices + 1)).astype(np.int64)
    return TaskGraph(problem.devices, arrays["model"].astype(np.int64), arrays["replica"].astype(np.int64),
                     arrays["micro_batch"].astype(np.int64), arrays["stage"].astype(np.int64),
                     arrays["forward"].astype(bool), device, arrays["duration"], arrays["memory"],
                     chain_prev, chain_next, device_start, device_tasks)
