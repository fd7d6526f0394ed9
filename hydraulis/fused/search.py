"""The fused-schedule search: the recipe that turns a problem into a schedule.

1. Build the task graph and the lower bound (:mod:`hydraulis.fused.bound`).
2. Simulate the baselines: sequential, greedy, interleaved (:mod:`hydraulis.fused.baselines`).
3. Build starting schedules under the memory limit (:mod:`hydraulis.fused.construct`).
4. Anneal from them in ``workers`` processes, each with its own seed and start
   (:mod:`hydraulis.fused.anneal`): a makespan phase of epochs, each restarted from the best
   state, until the makespan reaches the bound, the evaluation budget's makespan share is
   spent, or 80 % of the time limit has passed; then a memory phase that never lengthens the
   makespan, until the budget or time limit ends or three epochs bring nothing. A worker that
   reaches the bound tells the others to stop their makespan phase.
5. Return the best schedule (makespan, then peak memory, then the sum of per-device peaks).

Temperatures scale with the mean task duration ``p̄`` (makespan: ``0.05·p̄ → 0.005·p̄``) and
the mean memory ``μ̄`` (memory: ``0.5·μ̄ → 0.01·μ̄``); an epoch has ``10·T`` moves (20 k–100 k).
"""

from __future__ import annotations

import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import Enum

import numpy as np

from hydraulis.base.errors import require, require_int, require_number
from hydraulis.fused import anneal
from hydraulis.fused.baselines import greedy_order, interleaved_order, sequential_order
from hydraulis.fused.bound import LowerBound, lower_bound
from hydraulis.fused.construct import starting_orders
from hydraulis.fused.problem import FusedProblem
from hydraulis.fused.simulate import Timeline, simulate
from hydraulis.fused.tasks import TaskGraph, task_graph

logger = logging.getLogger(__name__)

MAKESPAN_TEMPERATURES = (0.05, 0.005)
MEMORY_TEMPERATURES = (0.5, 0.01)
WINDOW = 8
CRITICAL_SHARE = 0.5
TIE_WEIGHT = 0.1
MAKESPAN_SHARE = 0.8
STALE_MEMORY_EPOCHS = 3
EPOCH_MOVES = (20_000, 100_000)
EPS = 1e-9


class StopReason(str, Enum):
    LOWER_BOUND = "lower_bound"
    TIME_LIMIT = "time_limit"
    EVALUATIONS = "evaluations"


@dataclass(frozen=True)
class FuseOptions:
    """``time_limit_s`` is a safety stop; ``evaluations`` (per worker, 0: none) a deterministic
    budget; ``memory_limit`` (None: none) a hard limit on every device's peak memory."""

    time_limit_s: float = 60.0
    workers: int = 1
    seed: int = 0
    memory_limit: float | None = None
    evaluations: int = 0

    def __post_init__(self) -> None:
        require(require_number(self.time_limit_s, "time_limit") > 0, "time_limit", self.time_limit_s, "must be > 0")
        require_int(self.workers, "workers", minimum=1, maximum=1024)
        require_int(self.seed, "seed", minimum=0)
        require_int(self.evaluations, "evaluations", minimum=0)
        if self.memory_limit is not None:
            require(require_number(self.memory_limit, "memory_limit") > 0, "memory_limit", self.memory_limit,
                    "must be > 0")


@dataclass(frozen=True, eq=False)
class FusedResult:
    """The best schedule found, the bound and the baselines it is judged against."""

    problem: FusedProblem
    graph: TaskGraph
    schedule: Timeline
    bound: LowerBound
    sequential: Timeline
    greedy: Timeline
    interleaved: Timeline
    evaluations: int
    stop: StopReason


def fuse(problem: FusedProblem, options: FuseOptions = FuseOptions()) -> FusedResult:
    """Search a fused schedule of ``problem`` (module docstring)."""
    began = time.monotonic()
    limit = _memory_limit(problem, options)
    graph = task_graph(problem)
    bound = lower_bound(problem, graph)
    sequential, greedy, interleaved = (simulate(graph, make(problem, graph))
                                       for make in (sequential_order, greedy_order, interleaved_order))
    starts = starting_orders(problem, graph, limit, options.seed)
    starts.sort(key=lambda order: _key(simulate(graph, order)))
    seconds = max(0.0, options.time_limit_s - (time.monotonic() - began))
    jobs = [(problem, options, limit, starts[w % len(starts)], bound.value_ms, w, seconds)
            for w in range(options.workers)]
    if options.workers == 1:
        outcomes = [_worker(*jobs[0])]
    else:
        _State(graph, starts[0]).epoch(1, 1.0, 1.0, limit, anneal.MAKESPAN, np.inf, 0.0)  # compile before forking
        context = multiprocessing.get_context("fork")
        stop = context.Event()
        with ProcessPoolExecutor(options.workers, mp_context=context, initializer=_set_stop,
                                 initargs=(stop,)) as pool:
            outcomes = list(pool.map(_worker, *zip(*jobs)))
    timelines = [simulate(graph, order) for order, _, _ in outcomes]
    best = min(range(len(outcomes)), key=lambda w: (*_key(timelines[w]), w))
    stop_reason = (StopReason.LOWER_BOUND if timelines[best].makespan_ms <= bound.value_ms + EPS
                   else outcomes[best][2])
    return FusedResult(problem, graph, timelines[best], bound, sequential, greedy, interleaved,
                       sum(o[1] for o in outcomes), stop_reason)


_STOP = None


def _set_stop(event) -> None:
    global _STOP
    _STOP = event


def _stopped() -> bool:
    return _STOP is not None and _STOP.is_set()


def _worker(problem: FusedProblem, options: FuseOptions, limit: float, start: np.ndarray, target: float,
            worker: int, seconds: float) -> tuple[np.ndarray, int, StopReason]:
    """One annealing run: makespan phase, then memory phase (module docstring)."""
    began = time.monotonic()
    graph = task_graph(problem)
    anneal.seed(options.seed * 7919 + worker)
    state = _State(graph, start)
    epoch = int(min(EPOCH_MOVES[1], max(EPOCH_MOVES[0], 10 * graph.size)))
    mean_p, mean_mu = float(graph.duration.mean()), float(graph.memory.mean()) or 1.0
    budget = options.evaluations
    used, reason = 0, StopReason.TIME_LIMIT
    while True:
        if state.best[0] <= target + EPS:
            reason = StopReason.LOWER_BOUND
            if _STOP is not None:
                _STOP.set()
            break
        if budget and used >= MAKESPAN_SHARE * budget:
            reason = StopReason.EVALUATIONS
            break
        if time.monotonic() - began >= MAKESPAN_SHARE * seconds or _stopped():
            break
        used += state.epoch(epoch, mean_p * MAKESPAN_TEMPERATURES[0], mean_p * MAKESPAN_TEMPERATURES[1], limit,
                            anneal.MAKESPAN, np.inf, target)
        logger.debug("worker %d: makespan %.4f after %d evaluations", worker, state.best[0], used)
    cap, stale = state.best[0], 0
    while stale < STALE_MEMORY_EPOCHS and (not budget or used < budget) \
            and time.monotonic() - began < seconds:
        before = tuple(state.best)
        used += state.epoch(epoch, mean_mu * MEMORY_TEMPERATURES[0], mean_mu * MEMORY_TEMPERATURES[1], limit,
                            anneal.MEMORY, cap, target)
        stale = stale + 1 if tuple(state.best) == before else 0
    return state.best_order, used, reason


class _State:
    """The annealing state of one worker: current orders and schedule, and the best seen."""

    def __init__(self, graph: TaskGraph, order: np.ndarray) -> None:
        self.graph = graph
        self.best_order = order.copy()
        timeline = simulate(graph, order)
        self.best = np.array([timeline.makespan_ms, timeline.peak_memory, timeline.memory_sum])

    def epoch(self, iterations: int, t_start: float, t_end: float, limit: float, phase: int, cap: float,
              target: float) -> int:
        g = self.graph
        timeline = simulate(g, self.best_order)
        order = timeline.order.copy()
        return int(anneal.anneal_epoch(order, g.positions(order), timeline.start.copy(), timeline.end.copy(),
                                       timeline.device_peaks.copy(), g.device_start, g.device, g.duration,
                                       g.chain_prev, g.chain_next, g.forward, g.memory, iterations, t_start, t_end,
                                       WINDOW, CRITICAL_SHARE, TIE_WEIGHT, limit, phase, cap, target,
                                       self.best_order, self.best))


def _memory_limit(problem: FusedProblem, options: FuseOptions) -> float:
    if options.memory_limit is None:
        return float("inf")
    least = problem.max_memory_per_micro_batch
    require(options.memory_limit >= least, "memory_limit", options.memory_limit,
            f"is below one micro-batch's memory ({least:g}): no schedule can meet it")
    return float(options.memory_limit)


def _key(timeline: Timeline) -> tuple[float, float, float]:
    return (round(timeline.makespan_ms, 9), round(timeline.peak_memory, 9), round(timeline.memory_sum, 9))
