"""Starting schedules for the search: list schedules by critical-path priority.

Rule *longest tail first* (LTF): an idle device starts, among its ready tasks, the one whose
micro-batch has the most work left after it (``Q_t``, :func:`hydraulis.fused.bound.chain_heads_tails`;
Jackson's rule for one machine with tails). Forwards sit on long chains, so LTF fills the
pipelines as fast as possible: on most uniform problems it meets the lower bound outright, at
the price of many micro-batches in flight. Variants add noise ``U(0, σ·p̄)`` to the priorities
(diversity for the multi-start). *Reverse LTF* runs the same rule on the mirrored problem —
every chain reversed, priority the head ``H_t`` — and reverses the resulting orders: it packs
the end of the schedule as tightly as LTF packs the start, and wins where the idle sits at the
end (a pipeline's drain). Under a memory limit a device does not start a forward that
would hold more than the limit; such a rule can stall (every device waits on memory that only
a blocked backward would free), and then the *serial* schedule — micro-batch after micro-batch,
one at a time, never more than one micro-batch's memory on any device — is the fallback that
always meets a limit ``≥ max μ``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from hydraulis.fused.baselines import capped, greedy_order, interleaved_order, list_schedule, sequential_order
from hydraulis.fused.bound import chain_heads_tails
from hydraulis.fused.problem import FusedProblem
from hydraulis.fused.simulate import device_peaks
from hydraulis.fused.tasks import TaskGraph

NOISE_LEVELS = (0.0, 0.5, 1.0, 2.0)
"""σ of the LTF variants, in mean task durations."""


def starting_orders(problem: FusedProblem, graph: TaskGraph, memory_limit: float, seed: int,
                    variants: int = 2) -> list[np.ndarray]:
    """LTF and reverse LTF with their noisy variants (``variants`` per noise level), the greedy,
    interleaved and sequential baselines, all under ``memory_limit``; the serial schedule when
    none of them fits."""
    head, tail = chain_heads_tails(graph)
    rng = np.random.default_rng(seed)
    mirror = mirrored(graph)
    orders = []
    for sigma in NOISE_LEVELS:
        for _ in range(1 if sigma == 0 else variants):
            noise = rng.random(graph.size) * sigma * graph.duration.mean()
            orders.append(priority_order(graph, tail + noise, memory_limit))
            backwards = priority_order(mirror, head + noise, memory_limit)
            orders.append(None if backwards is None else reversed_orders(graph, backwards))
    orders += [greedy_order(problem, graph, memory_limit), interleaved_order(problem, graph, memory_limit),
               sequential_order(problem, graph)]
    fitting = [o for o in orders if o is not None and _peak(graph, o) <= memory_limit]
    return fitting or [serial_order(graph)]


def priority_order(graph: TaskGraph, priority: np.ndarray, memory_limit: float = float("inf")) -> np.ndarray | None:
    """List schedule: the ready task of highest ``priority`` whose forward fits the limit."""
    return list_schedule(graph, capped(graph, lambda device, ready, now: max(ready, key=lambda t: priority[t]),
                                       memory_limit))


def mirrored(graph: TaskGraph) -> TaskGraph:
    """The graph with every chain reversed: scheduling it forwards is scheduling ``graph``
    backwards from the end. A micro-batch's memory interval is the same set of moments read
    backwards, so in the mirror it starts at the backward (``forward`` flags flipped)."""
    return replace(graph, chain_prev=graph.chain_next, chain_next=graph.chain_prev, forward=~graph.forward)


def reversed_orders(graph: TaskGraph, order: np.ndarray) -> np.ndarray:
    """Each device's order reversed: an order of the mirror becomes one of ``graph``. The
    makespan is the longest path through chain and device edges, which reversing every edge
    keeps, so both have the same makespan."""
    return np.concatenate([graph.device_order(order, d)[::-1] for d in range(graph.devices)])


def serial_order(graph: TaskGraph) -> np.ndarray:
    """Every micro-batch's chain after the previous one's: one micro-batch in flight."""
    return np.lexsort((np.arange(graph.size), graph.device)).astype(np.int64)


def _peak(graph: TaskGraph, order: np.ndarray) -> float:
    peaks = np.zeros(graph.devices)
    device_peaks(order, graph.device_start, graph.forward, graph.memory, peaks)
    return float(peaks.max())
