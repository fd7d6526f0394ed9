"""Small problems, random valid orders and the checker's view of a simulated schedule."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hydraulis.fused import FusedProblem, check_schedule, fused_model, scheduled_tasks, simulate, task_graph
from hydraulis.fused.construct import priority_order


def two_models(devices: int = 4, critic_stages: int = 2, micro_batches: int = 3, speedup: float = 2.0,
               memory: float = 1.5) -> FusedProblem:
    return FusedProblem(devices, (
        fused_model("actor", devices, 1, "forward", micro_batches, 1.0, None, 2.0),
        fused_model("critic", critic_stages, devices // critic_stages, "reverse", micro_batches, 1.0 / speedup, None,
                    memory)))


@st.composite
def problems(draw, max_devices: int = 4, max_micro_batches: int = 3) -> FusedProblem:
    """Random problems: 1–2 models, any divisor layout, per-micro-batch times on a 0.5 ms grid."""
    devices = draw(st.integers(1, max_devices))
    divisors = [s for s in range(1, devices + 1) if devices % s == 0]
    models = []
    for k in range(draw(st.integers(1, 2))):
        stages = draw(st.sampled_from(divisors))
        replicas = devices // stages
        m = draw(st.integers(1, max_micro_batches))
        times = st.lists(st.integers(1, 6).map(lambda v: v / 2), min_size=m, max_size=m)
        models.append(fused_model(f"m{k}", stages, replicas, draw(st.sampled_from(["forward", "reverse"])), m,
                                  draw(times), draw(times), draw(st.lists(st.integers(0, 3), min_size=m, max_size=m))))
    return FusedProblem(devices, tuple(models))


def random_order(problem: FusedProblem, seed: int) -> np.ndarray:
    """A valid order: a list schedule with random priorities."""
    graph = task_graph(problem)
    return priority_order(graph, np.random.default_rng(seed).random(graph.size))


def assert_valid(problem: FusedProblem, order: np.ndarray, memory_limit: float | None = None):
    """Simulate ``order`` and have the independent checker accept it; returns the timeline."""
    graph = task_graph(problem)
    timeline = simulate(graph, order)
    assert timeline is not None
    assert check_schedule(problem, scheduled_tasks(graph, timeline), memory_limit) == []
    return timeline
