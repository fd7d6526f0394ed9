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

import math
from pathlib import Path

import numpy as np

from hydraulis.artifacts.proposal import strategy_from_record, strategy_to_list
from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import scheme_from_record, scheme_to_dict
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.types import (
    BatchingMethod,
    MicroBatches,
    PipelinePlan,
    PipelinePlans,
    StepPlan,
    Synthesis,
)

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
        "pipelines": _pipelines_to_list(plan.pipelines, plan.alignment),
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


def _pipelines_to_list(pipelines: PipelinePlans, alignment: int) -> list[dict]:
    """The pipelines' records, written from the plan's flat arrays (no :class:`MicroBatch` made)."""
    micro_batches = _micro_batches_to_list(pipelines.micro_batches, alignment)
    bounds, proven = pipelines.pipeline_bounds.tolist(), pipelines.proven_ms.tolist()
    records = []
    for p, (predicted, status) in enumerate(zip(pipelines.predicted_ms.tolist(), pipelines.solver_status)):
        kind = pipelines.classes[pipelines.class_of[p]]
        records.append({"scheme": scheme_to_dict(kind.scheme), "max_seq_len": kind.max_seq_len,
                        "predicted_ms": predicted, "solver_status": status,
                        **({} if math.isnan(proven[p]) else {"proven_ms": proven[p]}),
                        "micro_batches": micro_batches[bounds[p]:bounds[p + 1]]})
    return records


def _micro_batches_to_list(micro_batches: MicroBatches, alignment: int) -> list[dict]:
    sequences, lengths = micro_batches.sequences.tolist(), micro_batches.lengths.tolist()
    bounds, tokens = micro_batches.bounds.tolist(), micro_batches.tokens.tolist()
    cu_seqlens = micro_batches.cu_seqlens(alignment).tolist()
    return [{"sequences": sequences[first:last], "lengths": lengths[first:last], "tokens": tokens[j],
             "cu_seqlens": cu_seqlens[first + j:last + j + 1]}
            for j, (first, last) in enumerate(zip(bounds, bounds[1:]))]


def _pipeline_from_record(record: Record, alignment: int) -> PipelinePlan:
    return PipelinePlan(
        scheme=scheme_from_record(record.sub("scheme")),
        max_seq_len=record.int("max_seq_len"),
        micro_batches=_micro_batches_from_records(record.records("micro_batches"), alignment),
        predicted_ms=record.float("predicted_ms"),
        solver_status=record.str("solver_status", ""),
        proven_ms=None if record.raw("proven_ms", None) is None else record.float("proven_ms"),
    )


def _micro_batches_from_records(records: list[Record], alignment: int) -> MicroBatches:
    """The micro-batches of ``records`` as flat arrays; ``tokens`` and ``cu_seqlens``, where
    given, must agree with the lengths."""
    sequences, lengths, sizes = [], [], []
    for record in records:
        given_sequences, given_lengths = record.ints("sequences"), record.ints("lengths")
        require(len(given_lengths) == len(given_sequences), f"{record.path}.lengths", len(given_lengths),
                f"must have one entry per sequence ({len(given_sequences)})")
        sequences.extend(given_sequences)
        lengths.extend(given_lengths)
        sizes.append(len(given_sequences))
    micro_batches = MicroBatches(sequences, lengths, np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))))
    tokens = micro_batches.tokens.tolist()
    cu_seqlens = micro_batches.cu_seqlens(alignment).tolist()
    offsets = micro_batches.bounds.tolist()
    for j, record in enumerate(records):
        first, last = offsets[j] + j, offsets[j + 1] + j + 1
        for key, derived in (("tokens", tokens[j]), ("cu_seqlens", cu_seqlens[first:last])):
            given = record.raw(key, None)
            if given is not None and given != derived:
                raise HydraulisError(f"{record.path}.{key}", given, f"disagrees with the lengths ({derived})")
    return micro_batches


def _synthesis_to_dict(synthesis: Synthesis) -> dict:
    return {"pipelines": strategy_to_list(synthesis.strategy), "reduce_ms": synthesis.reduce_ms,
            "switch_ms": synthesis.switch_ms, "new_communicators": synthesis.new_communicators,
            "proposal_ms": synthesis.proposal_ms, "evaluations": synthesis.evaluations, "start": synthesis.start}


def _synthesis_from_record(record: Record) -> Synthesis:
    return build(record.path, Synthesis, strategy=strategy_from_record(record), reduce_ms=record.float("reduce_ms"),
                 switch_ms=record.float("switch_ms"), new_communicators=record.int("new_communicators"),
                 proposal_ms=record.float("proposal_ms"), evaluations=record.int("evaluations"),
                 start=record.str("start", ""))
