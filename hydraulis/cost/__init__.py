"""The cost model (design §6): pure functions of numbers, numpy only.

* :mod:`.order` — the one 1F1B order of a stage, which the runtime executes;
* :mod:`.pipeline` — a pipeline's time under 1F1B, closed form and exact event simulation
  (one schedule, or many at once);
* :mod:`.memory` — memory per device and the longest sequence a scheme can hold;
* :mod:`.step` — a strategy's step time and the gradient reduction into the optimizer layout;
* :mod:`.bound` — lower bounds of any plan of a batch: design §6's ``LB``, a tighter one
  with fixed costs and the reduction, and per reduction level the least compute part;
* :mod:`.staged`, :mod:`.mixed_bound` — staged pipelines on mixed clusters and their bound (design §6.7).
"""

from hydraulis.cost.bound import BoundScheme, LevelBound, StepBound, level_bounds, lower_bound_ms, step_bound
from hydraulis.cost.memory import MemoryBreakdown, MemoryLimit, SchemeCapacity, memory_breakdown, scheme_capacities
from hydraulis.cost.pipeline import (
    PipelineTimeline,
    ScheduledOp,
    pipeline_time_closed_form,
    pipeline_times_1f1b,
    simulate_1f1b,
    simulate_1f1b_stages,
)
from hydraulis.cost.step import ReductionModel, exposed_reduce_ms, reduce_ms, reduction_model, step_time_ms

__all__ = [
    "BoundScheme",
    "LevelBound",
    "MemoryBreakdown",
    "MemoryLimit",
    "PipelineTimeline",
    "ScheduledOp",
    "StepBound",
    "SchemeCapacity",
    "level_bounds",
    "lower_bound_ms",
    "memory_breakdown",
    "pipeline_time_closed_form",
    "pipeline_times_1f1b",
    "reduce_ms",
    "exposed_reduce_ms",
    "ReductionModel",
    "reduction_model",
    "scheme_capacities",
    "simulate_1f1b",
    "simulate_1f1b_stages",
    "step_bound",
    "step_time_ms",
]
