"""Per-step dispatch (design §8): for one global batch, choose a strategy of the proposal,
assign sequences to its pipelines (stage 1), pack each pipeline's sequences into micro-batches
(stage 2). Pure: frozen values in, a :class:`~hydraulis.base.step_plan.StepPlan` out; no I/O, no torch.

* :mod:`.dispatcher` — :func:`dispatch`, the recipe, strategy choice and the plan's bound;
* :mod:`.bounds` — lower bounds of a strategy's compute time, design §6's work bound;
* :mod:`.device_bound` — the devices a step needs to compute within a time (a linear program),
  hence the least compute part of any plan (design §8.2);
* :mod:`.batch` — checking, alignment, oversize sequences (error, truncate, split);
* :mod:`.assign` — stage 1, sequences → pipelines;
* :mod:`.balanced_packing` — stage 2, sequences → micro-batches and their order;
* :mod:`.ilp` — the integer program for the slowest pipeline;
* :mod:`.baselines` — padding, fixed packing, dispatch + fixed packing;
* :mod:`.summary` — batching methods compared over many steps, a plan's micro-batch times and 1F1B timelines;
* :mod:`.synthesis`, :mod:`.synthesis_search`, :mod:`.menu`, :mod:`.fluid_estimate`,
  :mod:`.synthesis_memory` — a strategy made for the step, switch included (design §8.2);
* :mod:`.gap` — a plan's step time cut into parts that add up; :mod:`.assignments` — per-rank
  assignments for any runtime (design §8.3);
* :mod:`.options`, :mod:`.validation`, :mod:`.estimate`, :mod:`.pipelines`, :mod:`.packing` — the
  pieces they share.
"""

from hydraulis.dispatch.bounds import strategy_bound, work_lower_bound_ms
from hydraulis.dispatch.dispatcher import dispatch
from hydraulis.dispatch.options import DispatchOptions, OversizePolicy
from hydraulis.dispatch.packing import PackingStatus
from hydraulis.dispatch.summary import (
    MethodSummary,
    compare_methods,
    micro_batch_times_ms,
    pipeline_timelines,
    summarise_plans,
)

__all__ = [
    "DispatchOptions",
    "MethodSummary",
    "OversizePolicy",
    "PackingStatus",
    "compare_methods",
    "dispatch",
    "micro_batch_times_ms",
    "pipeline_timelines",
    "strategy_bound",
    "summarise_plans",
    "work_lower_bound_ms",
]
