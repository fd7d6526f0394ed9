"""A pipeline's time under the 1F1B schedule, with micro-batches of different lengths.

Every stage of a pipeline holds ``L/pp`` layers, so micro-batch ``j`` costs the same ``t_j`` on
every stage, split into a forward part ``f_j = φ·t_j`` and a backward part
``b_j = (1 − φ)·t_j`` (φ = 1/3 by default: backward ≈ 2 × forward). A hand-off between stages
costs ``d`` ms. The closed form (:func:`pipeline_time_closed_form`) is a lower bound of the
exact schedule (:func:`simulate_1f1b`; stages that differ: :func:`simulate_1f1b_stages`; many
schedules at once: :func:`pipeline_times_1f1b`)::

    T_closed = (p − 1)·(f_1 + d) + Σ_j t_j + (p − 1)·(b_v + d)

Worked example: ``p = 2``, ``t = (3, 3, 3)`` ms, φ = 1/3: ``T = 1·1 + 9 + 1·2 = 12 = (3 + 1)·3``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numba
import numpy as np

from hydraulis.base.errors import require, require_int
from hydraulis.base.types import PipelineModel
from hydraulis.cost.order import Phase, one_f_one_b, one_f_one_b_position


@dataclass(frozen=True)
class ScheduledOp:
    """One forward or backward of micro-batch ``micro_batch`` on ``stage``, in ms."""

    stage: int
    micro_batch: int
    phase: Phase
    start: float
    end: float


@dataclass(frozen=True)
class PipelineTimeline:
    """The simulated schedule: its makespan and, when recorded, every operation."""

    makespan_ms: float
    ops: tuple[ScheduledOp, ...] = ()


def pipeline_time_closed_form(times: Sequence[float], pp: int, model: PipelineModel = PipelineModel()) -> float:
    """``(p − 1)·(f_1 + d) + Σ_j t_j + (p − 1)·(b_v + d)``.

    **Closed form** (:func:`pipeline_time_closed_form`). The last stage cannot start before the
    first micro-batch's forward crosses the ``p − 1`` stages ahead of it, then must run all its
    ``Σ_j t_j`` of work, after which the last micro-batch's backward crosses ``p − 1`` stages back:

        T_closed = (p − 1)·(f_1 + d) + Σ_j t_j + (p − 1)·(b_v + d)

    It is a lower bound of the simulation for any micro-batches and equals it when all
    micro-batches are equal and ``d = 0``: ``(v + p − 1)·t``. (design §6's approximation
    ``Σ_j t_j + (p − 1)·max_j t_j`` is neither: with ``p = 2``, ``t = (T, ε)`` and φ = 1/3 the
    schedule takes ``2T + 2ε/3 < 2T + ε``.)
    """
    _check(times, pp)
    phi = model.forward_fraction
    edge = (pp - 1) * (phi * times[0] + (1.0 - phi) * times[-1] + 2.0 * model.p2p_ms)
    return float(sum(times)) + edge


def simulate_1f1b(
    times: Sequence[float], pp: int, model: PipelineModel = PipelineModel(), record: bool = False
) -> PipelineTimeline:
    """Exact 1F1B schedule of micro-batches with per-stage times ``times`` (execution order).

    **Exact event simulation** (:func:`simulate_1f1b`). Stage ``s`` of ``p`` runs its operations in
    1F1B order (:func:`hydraulis.cost.order.one_f_one_b`: ``min(p − 1 − s, v)`` warm-up forwards,
    one forward and one backward alternating, the remaining backwards). An operation starts when its
    stage is free and its input has arrived:

        start(F_j, s) = max(free_s, end(F_j, s − 1) + d)
        start(B_j, s) = max(free_s, end(B_j, s + 1) + d)      (B_j on the last stage follows F_j)

    The pipeline time is the end of the last operation.
    """
    _check(times, pp)
    return simulate_1f1b_stages([times] * pp, model, record)


def simulate_1f1b_stages(
    times: Sequence[Sequence[float]], model: PipelineModel = PipelineModel(), record: bool = False
) -> PipelineTimeline:
    """Exact 1F1B schedule where micro-batch ``j`` takes ``times[σ][j]`` on stage ``σ``: the
    stages of a staged pipeline differ in device type, tp and layers (design §6.7), so one
    micro-batch takes a different time on each. The recurrences of :func:`simulate_1f1b` with
    ``f_{σ,j} = φ·t_{σ,j}``, ``b_{σ,j} = (1 − φ)·t_{σ,j}``; equal rows give :func:`simulate_1f1b`.

    **Stages that differ** (:func:`simulate_1f1b_stages`). In a staged pipeline (design §6.7)
    micro-batch ``j`` takes ``t_{σ,j}`` on stage ``σ``; the same recurrences with per-stage
    durations give its exact schedule.
    """
    pp = len(times)
    require(pp > 0, "stage_times", 0, "must hold one row per stage")
    v = len(times[0])
    for row in times:
        _check(row, pp)
        require(len(row) == v, "stage_times", len(row), f"must hold {v} micro-batches on every stage")
    phi = model.forward_fraction
    return simulate_1f1b_phases([[phi * t for t in row] for row in times],
                                [[(1.0 - phi) * t for t in row] for row in times], model.p2p_ms, record)


def simulate_1f1b_phases(forward: Sequence[Sequence[float]], backward: Sequence[Sequence[float]], p2p_ms: float,
                         record: bool = False) -> PipelineTimeline:
    """The recurrences of :func:`simulate_1f1b` with every operation's own duration:
    ``forward[σ][j]`` and ``backward[σ][j]`` ms (measured ones, to replay a recorded schedule),
    hand-offs of ``p2p_ms``."""
    pp, v, d = len(forward), len(forward[0]), p2p_ms
    orders = [one_f_one_b(v, pp, s) for s in range(pp)]
    fwd_end = [[0.0] * v for _ in range(pp)]
    bwd_end = [[0.0] * v for _ in range(pp)]
    done_f = [[False] * v for _ in range(pp)]
    done_b = [[False] * v for _ in range(pp)]
    cursor = [0] * pp
    free = [0.0] * pp
    ops: list[ScheduledOp] = []
    remaining = pp * 2 * v
    while remaining:
        progressed = False
        for s in range(pp):
            order = orders[s]
            while cursor[s] < len(order):
                phase, j = order[cursor[s]].phase, order[cursor[s]].micro_batch
                if phase is Phase.FORWARD:
                    if s > 0 and not done_f[s - 1][j]:
                        break
                    ready = fwd_end[s - 1][j] + d if s > 0 else 0.0
                    start = max(free[s], ready)
                    end = start + forward[s][j]
                    fwd_end[s][j], done_f[s][j] = end, True
                else:
                    if s < pp - 1 and not done_b[s + 1][j]:
                        break
                    ready = bwd_end[s + 1][j] + d if s < pp - 1 else fwd_end[s][j]
                    start = max(free[s], ready)
                    end = start + backward[s][j]
                    bwd_end[s][j], done_b[s][j] = end, True
                free[s] = end
                cursor[s] += 1
                remaining -= 1
                progressed = True
                if record:
                    ops.append(ScheduledOp(s, j, phase, start, end))
        if not progressed:
            raise RuntimeError("1F1B schedule deadlocked; the stage orders are inconsistent")
    return PipelineTimeline(max(free), tuple(ops))


def pipeline_times_1f1b(times: np.ndarray, pp: int, model: PipelineModel = PipelineModel()) -> np.ndarray:
    """Exact 1F1B makespans of ``times[r]`` (shape ``(rows, v)``, execution order), one per row;
    equal to :func:`simulate_1f1b` row by row.

    **Many schedules at once** (:func:`pipeline_times_1f1b`). The recurrences above form a fixed
    graph for given ``(p, v)``: every operation depends on the one before it on its stage and on one
    operation of a neighbouring stage. Numbered level by level (:func:`schedule_graph`), every
    operation comes after those it waits for, so one pass in that order (compiled, :func:`_sweep`)
    computes the same end times for a whole batch of micro-batch time vectors — what the
    dispatcher needs to compare many packings quickly.
    """
    require_int(pp, "pp", minimum=1)
    t = np.ascontiguousarray(times, dtype=np.float64)
    require(t.ndim == 2 and t.shape[1] > 0, "micro_batch_times", t.shape, "must be (rows, v) with v >= 1")
    sweep = _level_sweep(pp, t.shape[1])
    return _sweep(t, sweep.micro_batch, sweep.forward, sweep.remote, sweep.previous, sweep.dependency,
                  float(model.forward_fraction), float(model.p2p_ms))


@numba.njit(cache=True)
def _sweep(times, micro_batch, forward, remote, previous, dependency, phi, p2p_ms):
    """End times in op order: ``end = max(end(previous), end(dependency) + d·remote) + φ_o·t_j``;
    each row's makespan is its latest end."""
    rows, n = times.shape[0], micro_batch.size
    end = np.zeros((n + 1, rows))
    makespan = np.zeros(rows)
    backward = 1.0 - phi
    for op in range(n):
        share = phi if forward[op] else backward
        latency = p2p_ms if remote[op] else 0.0
        j, before, after = micro_batch[op], previous[op], dependency[op]
        for r in range(rows):
            ready = end[after, r] + latency
            start = end[before, r]
            if ready > start:
                start = ready
            finish = start + times[r, j] * share
            end[op, r] = finish
            if finish > makespan[r]:
                makespan[r] = finish
    return makespan


@dataclass(frozen=True)
class _LevelSweep:
    """A :class:`ScheduleGraph` with its ops renumbered level by level, so that every op comes
    after its ``previous`` and ``dependency`` (given in the new numbering; the sentinel stays
    last)."""

    micro_batch: np.ndarray
    forward: np.ndarray
    remote: np.ndarray
    previous: np.ndarray
    dependency: np.ndarray


@lru_cache(maxsize=256)
def _level_sweep(pp: int, v: int) -> _LevelSweep:
    """:func:`schedule_graph` of ``(pp, v)`` as a :class:`_LevelSweep` (cached)."""
    graph = schedule_graph(pp, v)
    ops = np.concatenate(graph.levels)
    renumbered = np.empty(ops.size + 1, dtype=np.int64)
    renumbered[ops] = np.arange(ops.size)
    renumbered[ops.size] = ops.size
    return _LevelSweep(graph.micro_batch[ops], graph.forward[ops], graph.remote[ops],
                       renumbered[graph.previous[ops]], renumbered[graph.dependency[ops]])


@dataclass(frozen=True)
class ScheduleGraph:
    """The operations of a 1F1B schedule of ``v`` micro-batches on ``p`` stages as arrays:
    op ``k`` is the forward (``forward[k]``) or backward of ``micro_batch[k]``; it follows
    ``previous[k]`` on its stage and needs ``dependency[k]`` (from a neighbouring stage when
    ``remote[k]``, which adds the hand-off latency); index ``n`` (one past the last op) is a
    sentinel ending at 0 for "none". ``levels`` group ops by depth in this graph."""

    micro_batch: np.ndarray
    forward: np.ndarray
    previous: np.ndarray
    dependency: np.ndarray
    remote: np.ndarray
    levels: tuple[np.ndarray, ...]


@lru_cache(maxsize=256)
def schedule_graph(pp: int, v: int) -> ScheduleGraph:
    """The graph of :class:`ScheduleGraph` for ``pp`` stages and ``v`` micro-batches (cached).

    Op ``(s, k)`` — the ``k``-th operation of stage ``s`` in 1F1B order — is numbered
    ``2v·s + k``; :func:`hydraulis.cost.order.one_f_one_b_position` gives ``k`` for every
    forward and backward at once. The depth ``1 + max(depth(previous), depth(dependency))`` has
    a closed form on stage ``s`` of ``p`` with ``w_s = p − 1 − s`` warm-up forwards:

        depth(F_j) = s + j + 1   (j ≤ w_s),      2j + s + 1   (j > w_s)
        depth(B_j) = 2j + 2p − s

    (by induction along the 1F1B order: a warm-up forward waits for the one before it and for
    its input, both at depth ``s + j``; from then on a stage alternates one forward and one
    backward, each one level after the other, and ``B_j`` on the last stage follows ``F_j``).
    Worked example, ``p = 2, v = 2``: stage 0 runs ``F0 F1 B0 B1`` at depths 1, 2, 4, 6; stage 1
    ``F0 B0 F1 B1`` at 2, 3, 4, 5. The levels are the ops of equal depth, by op number."""
    n = 2 * v * pp
    stage = np.repeat(np.arange(pp), 2 * v)
    j = np.tile(np.arange(v), 2 * pp)
    is_forward = np.tile(np.repeat([True, False], v), pp)
    op = 2 * v * stage + one_f_one_b_position(stage, pp, v, j, is_forward)
    micro_batch = np.empty(n, dtype=np.int64)
    forward = np.empty(n, dtype=bool)
    depth = np.empty(n, dtype=np.int64)
    micro_batch[op], forward[op] = j, is_forward
    depth[op] = np.where(is_forward, np.where(j <= pp - 1 - stage, stage + j + 1, 2 * j + stage + 1),
                         2 * j + 2 * pp - stage)
    forward_op = op[is_forward].reshape(pp, v)
    backward_op = op[~is_forward].reshape(pp, v)
    dependency = np.full(n, n, dtype=np.int64)
    remote = np.zeros(n, dtype=bool)
    dependency[forward_op[1:]], remote[forward_op[1:]] = forward_op[:-1], True
    dependency[backward_op[:-1]], remote[backward_op[:-1]] = backward_op[1:], True
    dependency[backward_op[-1]] = forward_op[-1]
    previous = np.arange(-1, n - 1, dtype=np.int64)
    previous[::2 * v] = n
    by_depth = np.argsort(depth, kind="stable")
    bounds = np.cumsum(np.bincount(depth)).tolist()
    levels = tuple(by_depth[start:stop] for start, stop in zip(bounds, bounds[1:]))
    return ScheduleGraph(micro_batch, forward, previous, dependency, remote, levels)


def _check(times: Sequence[float], pp: int) -> None:
    require_int(pp, "pp", minimum=1)
    require(len(times) > 0, "micro_batches", 0, "must hold at least one micro-batch")
    require(min(times) >= 0, "micro_batch_times", min(times), "must be >= 0")
