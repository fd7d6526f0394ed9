"""The step-plan artifact: versioned JSON, one per global batch.

Layout (``schema_version`` 1)::

    {"schema_version": 1, "kind": "step_plan", "strategy_index", "method", "predicted_ms",
     "lower_bound_ms", "planning_ms", "alignment", "seed", "notes": [...],
     "pipelines": [{"scheme": {"cp", "tp", "pp"}, "max_seq_len", "predicted_ms", "solver_status",
                    ["proven_ms",] "micro_batches": [{"sequences": [...], "lengths": [...], "tokens",
                                                      "cu_seqlens": [...]}]}],
     "synthesis": null | {"pipelines": [<a proposal strategy's pipelines>], "reduce_ms",
                          "switch_ms", "new_communicators", "proposal_ms", "evaluations",
                          "start"}}

``tokens`` and ``cu_seqlens`` are derived (with ``alignment``) and checked on load;
``proven_ms`` (a proven lower bound on the pipeline's time) is written only when known;
``synthesis`` (a strategy made for this step, :class:`~hydraulis.base.step_plan.Synthesis`) is absent or
null otherwise.
"""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts.proposal import strategy_from_record, strategy_to_list
from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod, MicroBatch, PipelinePlan, StepPlan, Synthesis

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
        "synthesis": None if plan.synthesis is None else _synthesis_to_dict(plan.synthesis),
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
    synthesis = record.optional_sub("synthesis")
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
        synthesis=None if synthesis is None else _synthesis_from_record(synthesis),
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


def _synthesis_to_dict(synthesis: Synthesis) -> dict:
    return {"pipelines": strategy_to_list(synthesis.strategy), "reduce_ms": synthesis.reduce_ms,
            "switch_ms": synthesis.switch_ms, "new_communicators": synthesis.new_communicators,
            "proposal_ms": synthesis.proposal_ms, "evaluations": synthesis.evaluations, "start": synthesis.start}


def _synthesis_from_record(record: Record) -> Synthesis:
    return build(record.path, Synthesis, strategy=strategy_from_record(record), reduce_ms=record.float("reduce_ms"),
                 switch_ms=record.float("switch_ms"), new_communicators=record.int("new_communicators"),
                 proposal_ms=record.float("proposal_ms"), evaluations=record.int("evaluations"),
                 start=record.str("start", ""))
