"""Fused pipeline schedules: two models' pipelines on the same devices, flowing in opposite
directions so each fills the other's bubbles (RLHF actor/critic training; design §12).

problem (:mod:`.problem`) → task graph (:mod:`.tasks`) → lower bound (:mod:`.bound`),
baselines (:mod:`.baselines`), starting schedules (:mod:`.construct`) → annealing
(:mod:`.anneal`, :mod:`.search`) over the exact simulator (:mod:`.simulate`) → schedule
(:mod:`.schedule`), judged by the independent checker (:mod:`.check`); :mod:`.from_plans` builds
a problem from two step plans. Pure: no file I/O, no torch.
"""

from hydraulis.cost.order import Phase
from hydraulis.fused.bound import LowerBound, lower_bound
from hydraulis.fused.check import check_schedule, peak_memory
from hydraulis.fused.from_plans import problem_from_step_plans
from hydraulis.fused.problem import FusedModel, FusedProblem, Placement, fused_model
from hydraulis.fused.schedule import FusedSchedule, ScheduledTask, fused_schedule, scheduled_tasks
from hydraulis.fused.search import FusedResult, FuseOptions, StopReason, fuse
from hydraulis.fused.simulate import Timeline, simulate
from hydraulis.fused.tasks import TaskGraph, task_graph

__all__ = [
    "FuseOptions",
    "FusedModel",
    "FusedProblem",
    "FusedResult",
    "FusedSchedule",
    "LowerBound",
    "Phase",
    "Placement",
    "ScheduledTask",
    "StopReason",
    "TaskGraph",
    "Timeline",
    "check_schedule",
    "fuse",
    "fused_model",
    "fused_schedule",
    "lower_bound",
    "peak_memory",
    "problem_from_step_plans",
    "scheduled_tasks",
    "simulate",
    "task_graph",
]
