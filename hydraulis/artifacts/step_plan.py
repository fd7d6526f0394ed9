"""The step-plan artifact: versioned JSON, one per global batch.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "step_plan", "strategy_index", "method", "predicted_ms",
     "lower_bound_ms", "planning_ms", "alignment", "seed", "notes": [...],
     "pipelines": [{"scheme": {"cp", "tp", "pp"}, "max_seq_len", "predicted_ms", "solver_status",
                    ["proven_ms",] "micro_batches": [{"sequences": [...], "lengths": [...], "tokens",
                                                      "cu_seqlens": [...]}]}]}

``tokens`` and ``cu_seqlens`` are derived (with ``alignment``) and checked on load;
``proven_ms`` (a proven lower bound on the pipeline's time) is written only when known.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.errors import HydraulisError
from hydraulis.types import BatchingMethod, MicroBatch, PipelinePlan, StepPlan

KIND = "step_plan"
SCHEMA_VERSION = 1


def step_plan_to_dict(plan: StepPlan) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "strategy_index": plan.strategy_index,
        "method": plan.method.value,
        "predicted_ms": plan.predicted_ms,
        "lower_bound_ms": plan.lower_bound_ms,
        "planning_ms": plan.planning_ms,
        "alignment": plan.alignment,
        "seed": plan.seed,
        "notes": list(plan.notes),
        "pipelines": [
            {
                "scheme": scheme_to_dict(p.scheme),
                "max_seq_len": p.max_seq_len,
                "predicted_ms": p.predicted_ms,
                "solver_status": p.solver_status,
                **({} if p.proven_ms is None else {"proven_ms": p.proven_ms}),
                "micro_batches": [
                    {"sequences": list(mb.sequences), "lengths": list(mb.lengths), "tokens": mb.tokens,
                     "cu_seqlens": list(mb.cu_seqlens(plan.alignment))}
                    for mb in p.micro_batches
                ],
            }
            for p in plan.pipelines
        ],
    }


def step_plan_from_dict(document: object) -> StepPlan:
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    method = record.str("method")
    try:
        batching = BatchingMethod(method)
    except ValueError:
        raise HydraulisError("method", method, f"must be one of {[m.value for m in BatchingMethod]}") from None
    alignment = record.int("alignment", 1)
    return build("", StepPlan,
        strategy_index=record.int("strategy_index"),
        method=batching,
        predicted_ms=record.float("predicted_ms"),
        lower_bound_ms=record.float("lower_bound_ms"),
        planning_ms=record.float("planning_ms"),
        pipelines=tuple(_pipeline_from_record(r, alignment) for r in record.records("pipelines")),
        alignment=alignment,
        seed=record.int("seed", 0),
        notes=record.strs("notes", []),
    )


def read_step_plan(path: str | Path) -> StepPlan:
    return step_plan_from_dict(read_json(path))


def write_step_plan(path: str | Path, plan: StepPlan) -> None:
    write_json(path, step_plan_to_dict(plan))


def _pipeline_from_record(record: Record, alignment: int) -> PipelinePlan:
    return PipelinePlan(
        scheme=scheme_from_record(record.sub("scheme")),
        max_seq_len=record.int("max_seq_len"),
        micro_batches=tuple(_micro_batch_from_record(r, alignment) for r in record.records("micro_batches")),
        predicted_ms=record.float("predicted_ms"),
        solver_status=record.str("solver_status", ""),
        proven_ms=None if record.raw("proven_ms", None) is None else record.float("proven_ms"),
    )


def _micro_batch_from_record(record: Record, alignment: int) -> MicroBatch:
    micro_batch = build(record.path, MicroBatch, sequences=record.ints("sequences"), lengths=record.ints("lengths"))
    for key, derived in (("tokens", micro_batch.tokens), ("cu_seqlens", micro_batch.cu_seqlens(alignment))):
        given = record.raw(key, None)
        if given is not None and (tuple(given) if isinstance(given, list) else given) != derived:
            raise HydraulisError(f"{record.path}.{key}", given, f"disagrees with the lengths ({derived})")
    return micro_batch
