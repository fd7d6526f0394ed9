"""The optimal makespan of a tiny fused problem, by branch and bound over active schedules —
the oracle that shows how tight :mod:`hydraulis.fused.bound` is.

Some optimal schedule is *active* (no task could start earlier without delaying another), and
Giffler & Thompson (1960) enumerate exactly the active schedules: among the next task of each
micro-batch chain take the one that can end first, ``t*`` on device ``d*`` ending at ``C*``,
and branch on every next task of ``d*`` that could start before ``C*``. A branch is cut when
``max(device free + device work left, chain ready + chain work left)`` reaches the incumbent.
Exponential: meant for a few dozen tasks.
"""

from __future__ import annotations

import numpy as np

from hydraulis.base.errors import require
from hydraulis.fused.tasks import TaskGraph

MAX_TASKS = 40


def optimal_makespan(graph: TaskGraph, incumbent: float = float("inf")) -> float:
    """The least makespan over every valid schedule of ``graph`` (at most ``MAX_TASKS`` tasks)."""
    require(graph.size <= MAX_TASKS, "tasks", graph.size, f"exceeds {MAX_TASKS}: too large for the exact search")
    heads = [int(t) for t in np.flatnonzero(graph.chain_prev < 0)]
    chain_left = {}
    for t in heads:
        total, u = 0.0, t
        while u >= 0:
            total += float(graph.duration[u])
            u = int(graph.chain_next[u])
        chain_left[t] = total
    device_left = np.bincount(graph.device, weights=graph.duration, minlength=graph.devices)
    best = [incumbent]
    _branch(graph, list(heads), [0.0] * len(heads), [chain_left[t] for t in heads], [0.0] * graph.devices,
            device_left.tolist(), 0.0, best)
    return best[0]


def _branch(graph: TaskGraph, nexts: list[int], ready: list[float], left: list[float], free: list[float],
            device_left: list[float], makespan: float, best: list[float]) -> None:
    live = [i for i, t in enumerate(nexts) if t >= 0]
    if not live:
        best[0] = min(best[0], makespan)
        return
    bound = max(max(free[d] + device_left[d] for d in range(graph.devices)),
                max(ready[i] + left[i] for i in live))
    if bound >= best[0] - 1e-9:
        return
    starts = {i: max(ready[i], free[graph.device[nexts[i]]]) for i in live}
    first = min(live, key=lambda i: starts[i] + graph.duration[nexts[i]])
    device = graph.device[nexts[first]]
    finish = starts[first] + graph.duration[nexts[first]]
    for i in live:
        t = nexts[i]
        if graph.device[t] != device or starts[i] >= finish - 1e-12:
            continue
        p = float(graph.duration[t])
        end = starts[i] + p
        saved = (nexts[i], ready[i], left[i], free[device], device_left[device])
        nexts[i], ready[i], left[i] = int(graph.chain_next[t]), end, left[i] - p
        free[device], device_left[device] = end, device_left[device] - p
        _branch(graph, nexts, ready, left, free, device_left, max(makespan, end), best)
        nexts[i], ready[i], left[i], free[device], device_left[device] = saved
