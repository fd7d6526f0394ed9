"""A lower bound on the makespan of every fused schedule of a problem.

Notation: a task ``t`` runs ``p_t`` ms on device ``d(t)``; its *head* ``H_t`` is the sum of
``p`` over its chain predecessors (the micro-batch's earlier stages), its *tail* ``Q_t`` the sum
over its chain successors. In any schedule ``start(t) ≥ H_t`` and ``C_max ≥ end(t) + Q_t``.

**1. One device, preemption allowed** (the classical one-machine relaxation of job-shop
scheduling). Keep only device ``d`` and forget every precedence except "``t`` cannot start
before ``r_t`` and leaves ``q_t`` after it". For any subset ``J`` of ``d``'s tasks, the task of
``J`` that starts first starts at ``≥ min_J r``, the device then needs ``Σ_J p`` for ``J``, and
the task of ``J`` that ends last leaves ``≥ min_J q`` after it, so

    C_max ≥ LB_d = max_J ( min_{t∈J} r_t + Σ_{t∈J} p_t + min_{t∈J} q_t ).

The details: :func:`lower_bound`."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from hydraulis.fused.problem import FusedProblem
from hydraulis.fused.tasks import TaskGraph


@dataclass(frozen=True)
class LowerBound:
    """``value_ms`` = ``max_d device_ms[d]``; ``work_ms`` the largest per-device work and
    ``chain_ms`` the longest micro-batch chain, both implied by it (reported for comparison)."""

    value_ms: float
    device_ms: tuple[float, ...]
    work_ms: float
    chain_ms: float

    @property
    def device(self) -> int:
        """The device that attains the bound."""
        return int(np.argmax(self.device_ms))


def lower_bound(problem: FusedProblem, graph: TaskGraph) -> LowerBound:
    """The bound of :func:`lower_bound`.

    The maximum over subsets is the makespan of Jackson's preemptive schedule (run, at every
    moment, the released task with the largest ``q``; Carlier 1982), computed in ``O(n log n)``.
    With ``J`` = all of ``d``'s tasks this is *per-device work plus the idle forced at the start
    and the end*; with ``J = {t}`` it is ``t``'s micro-batch's chain, i.e. *each model's own
    critical path* ``S·max_j (f_j + b_j)``.

    **2. Heads and tails that see the other devices (ranks).** When every micro-batch of a replica
    is the same, the ``m`` tasks of one chain position ``c`` (one stage, one phase) on ``d`` are
    interchangeable; name them by the order in which they start (on one device this is also the
    order in which they end). The ``j`` micro-batches that start ``c`` first have all run every
    chain position ``x < c`` that lives on another device ``u`` — ``P_u`` of them per micro-batch,
    ``j·|P_u|`` tasks on ``u``, one at a time, none before ``min_{P_u} H``. The last of them ends at
    ``≥ min_{P_u} H + j·Σ_{P_u} p``, and its micro-batch still needs at least ``min_{x∈P_u}
    gap(x, c)`` (the chain strictly between) before ``c``. Hence the ``j``-th task to start ``c``
    starts at

        r_j = max( H_c, max_u [ min_{P_u} H + j·Σ_{P_u} p + min_{x∈P_u} gap(x, c) ] ),

    and symmetrically the ``i``-th from last to end leaves ``q_i = max(Q_c, max_u [min gap(c, x) +
    i·Σ_{P'_u} p + min_{P'_u} Q])`` after it (``P'_u``: positions after ``c`` on ``u``). The
    ``j``-th starter is the ``(m − j + 1)``-th from last to end, so it gets ``(r_j, q_{m−j+1})``.
    These are valid heads and tails for every schedule (relabel each group by start order), so
    relaxation 1 over them is still a lower bound. Example: stage ``s`` of a forward model with
    ``f`` per stage: ``r_j(F_s) = (s + j − 1)·f`` — the pipeline fills at one micro-batch per
    ``f`` at best. Groups whose micro-batches differ keep ``(H, Q)``.

    **3. The bound** is ``max_d LB_d``. It is at least the per-device work ``max_d Σ p`` and every
    micro-batch's chain. Worked example: one model, ``S = 2``, ``m = 2``, ``f = 1``, ``b = 2``.
    Device 1 holds ``F_1`` with ``r = (1, 2)`` (each micro-batch's ``F_0`` on device 0 first) and
    ``B_1`` with ``r = (2, 3)``; tails: ``F_1``'s ``i``-th from last leaves ``2 + 2i`` (``B_1``,
    then ``i`` backwards on device 0), so its starters get ``q = (6, 4)``, and ``B_1``'s get ``q =
    (4, 2)``. Jackson's schedule: ``min r + Σ p + min q = 1 + 6 + 2 = 9 = (m + S − 1)·(f + b)``,
    1F1B's makespan — tight. Brute force over all active schedules (:mod:`hydraulis.fused.exact`)
    finds the bound tight on the tiny two-model instances of the tests but one, where three stages
    interlock (optimum 9⅓, bound 9).
    """
    head, tail = chain_heads_tails(graph)
    release, remaining = head.copy(), tail.copy()
    for k, model in enumerate(problem.models):
        for r in range(model.replicas):
            if _uniform(model.forward_ms[r]) and _uniform(model.backward_ms[r]):
                _rank_heads_tails(graph, k, r, model.stages, release, remaining)
    device_ms = tuple(
        jackson_preemptive(release[tasks], graph.duration[tasks], remaining[tasks])
        for tasks in (graph.device_order(graph.device_tasks, d) for d in range(graph.devices)))
    work = np.bincount(graph.device, weights=graph.duration, minlength=graph.devices)
    return LowerBound(max(device_ms), device_ms, float(work.max()), float((head + graph.duration + tail).max()))


def chain_heads_tails(graph: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """``H_t`` and ``Q_t``: the chain's work before and after each task."""
    first = graph.chain_prev < 0
    chain = np.cumsum(first) - 1
    cumulative = np.cumsum(graph.duration)
    chain_start = (cumulative - graph.duration)[first][chain]
    head = cumulative - graph.duration - chain_start
    chain_total = np.bincount(chain, weights=graph.duration)[chain]
    return head, chain_total - head - graph.duration


def jackson_preemptive(release: np.ndarray, duration: np.ndarray, tail: np.ndarray) -> float:
    """Makespan of Jackson's preemptive schedule = ``max_J (min r + Σ p + min q)``."""
    order = np.argsort(release, kind="stable")
    r, p, q = release[order], duration[order], tail[order]
    available: list[tuple[float, float]] = []
    now, best, i, n = 0.0, 0.0, 0, r.size
    while i < n or available:
        if not available:
            now = max(now, float(r[i]))
        while i < n and r[i] <= now:
            heapq.heappush(available, (-float(q[i]), float(p[i])))
            i += 1
        negative_tail, left = heapq.heappop(available)
        run = left if i >= n else min(left, float(r[i]) - now)
        now += run
        if left - run > 1e-12:
            heapq.heappush(available, (negative_tail, left - run))
        else:
            best = max(best, now - negative_tail)
    return best


def _rank_heads_tails(graph: TaskGraph, model: int, replica: int, stages: int, release: np.ndarray,
                      remaining: np.ndarray) -> None:
    """Overwrite ``release``/``remaining`` of one uniform replica with the rank values of §2."""
    tasks = np.flatnonzero((graph.model == model) & (graph.replica == replica))
    chain = 2 * stages
    m = tasks.size // chain
    p = graph.duration[tasks[:chain]]
    head = np.concatenate(([0.0], np.cumsum(p)[:-1]))
    tail = p.sum() - head - p
    j = np.arange(1, m + 1, dtype=np.float64)
    position_stage = np.where(np.arange(chain) < stages, np.arange(chain), chain - 1 - np.arange(chain))
    by_start = np.empty((chain, m))
    by_end = np.empty((chain, m))
    for c in range(chain):
        heads, tails = np.full(m, head[c]), np.full(m, tail[c])
        for u in range(stages):
            if u == position_stage[c]:
                continue
            on_u = np.flatnonzero(position_stage == u)
            before, after = on_u[on_u < c], on_u[on_u > c]
            if before.size:
                gap = head[c] - (head[before] + p[before])
                heads = np.maximum(heads, head[before].min() + j * p[before].sum() + gap.min())
            if after.size:
                gap = head[after] - (head[c] + p[c])
                tails = np.maximum(tails, gap.min() + j * p[after].sum() + tail[after].min())
        by_start[c] = heads
        by_end[c] = tails[::-1]
    rank = np.arange(m)
    for c in range(chain):
        members = tasks[rank * chain + c]
        release[members] = by_start[c]
        remaining[members] = by_end[c]


def _uniform(values: tuple[float, ...]) -> bool:
    return max(values) == min(values)
