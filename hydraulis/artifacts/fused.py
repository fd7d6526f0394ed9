"""Fused-schedule artifacts: the problem and the schedule, versioned JSON.

Problem (``schema_version`` 1)::

    {"schema_version": 1, "devices": N,
     "models": [{"name", "stages", "replicas", "placement": "forward" | "reverse",
                 "micro_batches", "forward_ms", "backward_ms", "memory_per_micro_batch"}, …]}

``micro_batches`` is an int (every replica) or one int per replica; ``forward_ms``,
``backward_ms`` (default: twice the forward) and ``memory_per_micro_batch`` (default 1) are a
number, a list of ``m`` numbers, or one list per replica. Schedule (``schema_version`` 1)::

    {"schema_version": 1, "kind": "fused_schedule", "makespan_ms", "lower_bound_ms",
     "sequential_ms", "greedy_ms", "interleaved_ms", "peak_memory", "memory_sum", "stop",
     "evaluations", "config": {…},
     "tasks": [{"device", "model", "replica", "micro_batch", "stage", "phase", "start_ms", "end_ms"}]}

``model`` indexes ``models``; ``phase`` is ``forward`` or ``backward``; times start at 0;
``config`` is the resolved search configuration.
"""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.base.errors import HydraulisError
from hydraulis.cost.order import Phase
from hydraulis.fused.problem import FusedModel, FusedProblem, PerMicroBatch, fused_model
from hydraulis.fused.schedule import FusedSchedule, ScheduledTask

PROBLEM_KIND = "fused_problem"
SCHEDULE_KIND = "fused_schedule"
SCHEMA_VERSION = 1
PHASE_NAMES = {Phase.FORWARD: "forward", Phase.BACKWARD: "backward"}
"""How a task's phase is written."""


def fused_problem_from_dict(document: object) -> FusedProblem:
    record = Record(document)
    check_header(record, PROBLEM_KIND, (SCHEMA_VERSION,))
    models = tuple(_model_from_record(r) for r in record.records("models"))
    return build("", FusedProblem, devices=record.int("devices"), models=models)


def fused_problem_to_dict(problem: FusedProblem) -> dict:
    return {"schema_version": SCHEMA_VERSION, "devices": problem.devices,
            "models": [_model_to_dict(m) for m in problem.models]}


def read_fused_problem(path: str | Path) -> FusedProblem:
    return fused_problem_from_dict(read_json(path))


def write_fused_problem(path: str | Path, problem: FusedProblem) -> None:
    write_json(path, fused_problem_to_dict(problem))


def fused_schedule_to_dict(schedule: FusedSchedule, config: dict | None = None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": SCHEDULE_KIND,
        "makespan_ms": schedule.makespan_ms,
        "lower_bound_ms": schedule.lower_bound_ms,
        "sequential_ms": schedule.sequential_ms,
        "greedy_ms": schedule.greedy_ms,
        "interleaved_ms": schedule.interleaved_ms,
        "peak_memory": schedule.peak_memory,
        "memory_sum": schedule.memory_sum,
        "stop": schedule.stop,
        "evaluations": schedule.evaluations,
        "config": config or {},
        "tasks": [{"device": t.device, "model": t.model, "replica": t.replica, "micro_batch": t.micro_batch,
                   "stage": t.stage, "phase": PHASE_NAMES[t.phase], "start_ms": t.start_ms, "end_ms": t.end_ms}
                  for t in schedule.tasks],
    }


def fused_schedule_from_dict(document: object) -> FusedSchedule:
    record = Record(document)
    check_header(record, SCHEDULE_KIND, (SCHEMA_VERSION,))
    tasks = tuple(ScheduledTask(r.int("device"), r.int("model"), r.int("replica"), r.int("micro_batch"),
                                r.int("stage"), _phase(r), r.float("start_ms"), r.float("end_ms"))
                  for r in record.records("tasks"))
    return FusedSchedule(record.float("makespan_ms"), record.float("lower_bound_ms"), record.float("sequential_ms"),
                         record.float("greedy_ms"), record.float("interleaved_ms", 0.0), record.float("peak_memory"),
                         record.float("memory_sum", 0.0), record.str("stop", ""), record.int("evaluations", 0), tasks)


def read_fused_schedule(path: str | Path) -> FusedSchedule:
    return fused_schedule_from_dict(read_json(path))


def write_fused_schedule(path: str | Path, schedule: FusedSchedule, config: dict | None = None) -> None:
    write_json(path, fused_schedule_to_dict(schedule, config))


def _model_from_record(record: Record) -> FusedModel:
    return build(record.path, fused_model, name=record.str("name"), stages=record.int("stages"),
                 replicas=record.int("replicas"), placement=record.str("placement"),
                 micro_batches=record.raw("micro_batches"), forward_ms=record.raw("forward_ms"),
                 backward_ms=record.raw("backward_ms", None),
                 memory_per_micro_batch=record.raw("memory_per_micro_batch", 1.0))


def _model_to_dict(model: FusedModel) -> dict:
    counts = model.micro_batches
    return {"name": model.name, "stages": model.stages, "replicas": model.replicas,
            "placement": model.placement.value,
            "micro_batches": counts[0] if len(set(counts)) == 1 else list(counts),
            "forward_ms": _compact(model.forward_ms), "backward_ms": _compact(model.backward_ms),
            "memory_per_micro_batch": _compact(model.memory_per_micro_batch)}


def _compact(values: PerMicroBatch) -> float | list:
    """A number when all values agree, one list when every replica's agree, else one per replica."""
    flat = {v for row in values for v in row}
    if len(flat) == 1:
        return flat.pop()
    if len(set(values)) == 1:
        return list(values[0])
    return [list(row) for row in values]


def _phase(record: Record) -> Phase:
    name = record.str("phase")
    phases = {text: phase for phase, text in PHASE_NAMES.items()}
    if name not in phases:
        raise HydraulisError(f"{record.path}.phase", name, f"must be one of {', '.join(phases)}")
    return phases[name]
