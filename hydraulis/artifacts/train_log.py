"""The training-log artifact: every step's record and the run's summary (``hydraulis train
--output-dir``).

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "train_log",
     "summary": {"steps", "tokens", "seconds", "tokens_per_s", "prediction_error",
                 "warm_prediction_error", "warm_error_median", "warm_error_p90" (null: no step after
                 a strategy's first), "first_loss", "last_loss", "strategies": [[SPEC, steps], ...], "synthesised", "communicators",
                 "communicator_bound", "skipped", "reduction_hidden_fraction" (null: not recorded)},
     "steps": [{"step", "strategy", "tokens", "loss", "measured_ms": [...], "predicted_ms": [...],
                "propagate_ms", "reduce_ms", "step_ms", "predicted_step_ms", "planning_ms",
                "wait_ms", "strategy_index", "communicators", "synthesised", "lr", "grad_norm", "skipped",
                "skipped_steps", "tokens_per_s", "reduction_inflight_ms", "reduction_hidden_ms", "exchanged",
                "aux_loss", "tokens_per_expert": [...],
                ["operations": [{"pipeline", "micro_batch_ms": [...],
                                 "ops": [{"stage", "micro_batch", "phase": "F" | "B",
                                          "start_ms", "end_ms"}]}]]}]}

The fields after ``synthesised`` (:class:`~hydraulis.job.records.StepRecord`) are optional
(absent: 0, false, true for ``exchanged``, empty), so older logs load; ``tokens_per_s`` is
recomputed on reading; ``operations`` (``--record-operations``) is written only when recorded.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.cost.pipeline import Phase, ScheduledOp
from hydraulis.job.records import PipelineOperations, StepRecord, summarize

KIND = "train_log"
SCHEMA_VERSION = 1
_TIMES = ("propagate_ms", "reduce_ms", "step_ms", "predicted_step_ms", "planning_ms", "wait_ms")


def train_log_to_dict(records: tuple[StepRecord, ...]) -> dict:
    summary = asdict(summarize(records))
    summary["strategies"] = [list(pair) for pair in summary["strategies"]]
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "summary": summary,
            "steps": [_step_to_dict(r) for r in records]}


def train_log_from_dict(document: object) -> tuple[StepRecord, ...]:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    return tuple(_step(r) for r in record.records("steps"))


def read_train_log(path: str | Path) -> tuple[StepRecord, ...]:
    return train_log_from_dict(read_json(path))


def write_train_log(path: str | Path, records: tuple[StepRecord, ...]) -> None:
    write_json(path, train_log_to_dict(records))


def _step_to_dict(step: StepRecord) -> dict:
    document = {**asdict(step), "measured_ms": list(step.measured_ms), "predicted_ms": list(step.predicted_ms),
                "tokens_per_expert": list(step.tokens_per_expert),
                "grad_norm": step.grad_norm if math.isfinite(step.grad_norm) else None,
                "tokens_per_s": step.tokens_per_s}
    del document["operations"]
    if step.operations:
        document["operations"] = [
            {"pipeline": p.pipeline, "micro_batch_ms": list(p.micro_batch_ms),
             "ops": [{"stage": op.stage, "micro_batch": op.micro_batch, "phase": op.phase.value,
                      "start_ms": op.start, "end_ms": op.end} for op in p.ops]}
            for p in step.operations]
    return document


def _step(record: Record) -> StepRecord:
    return build(record.path, StepRecord, step=record.int("step"), strategy=record.str("strategy"),
                 tokens=record.int("tokens"), loss=record.float("loss"), strategy_index=record.int("strategy_index", 0),
                 measured_ms=record.floats("measured_ms"), predicted_ms=record.floats("predicted_ms"),
                 communicators=record.int("communicators", 0), synthesised=record.bool("synthesised", False),
                 lr=record.float("lr", 0.0), skipped=record.bool("skipped", False),
                 grad_norm=math.nan if record.raw("grad_norm", 0.0) is None else record.float("grad_norm", 0.0),
                 skipped_steps=record.int("skipped_steps", 0),
                 operations=tuple(_operations(r) for r in (record.records("operations")
                                                            if record.raw("operations", None) is not None else [])),
                 reduction_inflight_ms=record.float("reduction_inflight_ms", 0.0),
                 reduction_hidden_ms=record.float("reduction_hidden_ms", 0.0),
                 exchanged=record.bool("exchanged", True),
                 aux_loss=record.float("aux_loss", 0.0), tokens_per_expert=record.ints("tokens_per_expert", []),
                 **{key: record.float(key) for key in _TIMES})


def _operations(record: Record) -> PipelineOperations:
    ops = tuple(build(r.path, ScheduledOp, stage=r.int("stage"), micro_batch=r.int("micro_batch"),
                      phase=r.enum("phase", Phase), start=r.float("start_ms"), end=r.float("end_ms"))
                for r in record.records("ops"))
    return build(record.path, PipelineOperations, pipeline=record.int("pipeline"),
                 micro_batch_ms=record.floats("micro_batch_ms"), ops=ops)

