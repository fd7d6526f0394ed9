"""Speed of the fused-schedule simulator: evaluations per second on the largest paper_exp
instance (N = 16, m = 64 per model: 4,096 tasks), three ways — the same kernel interpreted
(numba's ``py_func``), compiled full evaluation, and the compiled incremental re-evaluation
inside the annealing loop.

    .venv/bin/python benchmarks/fused_simulator.py
"""

from __future__ import annotations

import time

import numpy as np

from hydraulis.fused import FusedProblem, anneal, fused_model, simulate, task_graph
from hydraulis.fused.construct import priority_order
from hydraulis.fused.simulate import Simulator, evaluate, propagate


def main() -> None:
    problem = FusedProblem(16, (fused_model("actor", 16, 1, "forward", 64, 10.0, None, 2.0),
                                fused_model("critic", 8, 2, "reverse", 64, 5.0, None, 1.5)))
    graph = task_graph(problem)
    order = priority_order(graph, np.random.default_rng(0).random(graph.size))
    simulator = Simulator(graph)
    position = graph.positions(order)
    args = (order, position, graph.device_start, graph.device, graph.duration, graph.chain_prev, graph.chain_next,
            simulator.pointer, simulator.start, simulator.end, simulator.stack)
    print(f"{graph.size} tasks")
    print(f"interpreted full evaluation: {_rate(lambda: _interpreted(graph, args), 3):,.0f} /s")
    print(f"compiled full evaluation:    {_rate(lambda: evaluate(*args), 2000):,.0f} /s")
    timeline = simulate(graph, order)
    state = np.array([timeline.makespan_ms, timeline.peak_memory, timeline.memory_sum])
    anneal.seed(0)
    began = time.perf_counter()
    done = anneal.anneal_epoch(order.copy(), position.copy(), timeline.start.copy(), timeline.end.copy(),
                               timeline.device_peaks.copy(), graph.device_start, graph.device, graph.duration,
                               graph.chain_prev, graph.chain_next, graph.forward, graph.memory, 200_000, 0.5, 0.05, 8,
                               0.5, 0.1, np.inf, anneal.MAKESPAN, np.inf, 0.0, order.copy(), state)
    print(f"compiled incremental (annealing, moves + undo included): {done / (time.perf_counter() - began):,.0f} /s")


def _interpreted(graph, args) -> None:
    pointer = args[7]
    pointer[:] = graph.device_start[:-1]
    propagate.py_func(*args)


def _rate(call, repeats: int) -> float:
    call()
    began = time.perf_counter()
    for _ in range(repeats):
        call()
    return repeats / (time.perf_counter() - began)


if __name__ == "__main__":
    main()
