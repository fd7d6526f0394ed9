import json
from pathlib import Path

import numpy as np
import pytest

from hydraulis.artifacts import read_proposal, step_plan_from_dict, step_plan_to_dict
from hydraulis.artifacts.scheme_space import scheme_to_dict
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod, MicroBatch, PipelinePlan, Scheme, StepPlan
from hydraulis.dispatch import DispatchOptions, dispatch

PROPOSAL = Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_64dev.json"
HAND_PLAN = StepPlan(1, BatchingMethod.DISPATCH_BALANCED_PACKING, 1500.0, 1300.5, 3.25, (
    PipelinePlan(Scheme(2, 4, 1), 65536, (MicroBatch((0,), (40000,)),), 1400.0, "optimal"),
    PipelinePlan(Scheme(1, 2, 1), 8192, (MicroBatch((1, 2), (4000, 3001)), MicroBatch((3,), (7,))), 1200.0)),
    alignment=8)


def dispatched(method: BatchingMethod, alignment: int) -> StepPlan:
    lengths = np.random.default_rng(5).integers(1, 20000, 60)
    return dispatch(read_proposal(PROPOSAL), lengths, method, DispatchOptions(alignment=alignment, ilp_nodes=0))


def eager_pipelines(plan: StepPlan) -> list[dict]:
    """The version-1 pipelines written one :class:`MicroBatch` at a time (the oracle)."""
    return [{"scheme": scheme_to_dict(p.scheme), "max_seq_len": p.max_seq_len, "predicted_ms": p.predicted_ms,
             "solver_status": p.solver_status, **({} if p.proven_ms is None else {"proven_ms": p.proven_ms}),
             "micro_batches": [{"sequences": list(mb.sequences), "lengths": list(mb.lengths), "tokens": mb.tokens,
                                "cu_seqlens": list(mb.cu_seqlens(plan.alignment))} for mb in p.micro_batches]}
            for p in plan.pipelines]


@pytest.mark.parametrize("method", list(BatchingMethod))
@pytest.mark.parametrize("alignment", [1, 8])
def test_written_from_the_flat_arrays_as_one_micro_batch_at_a_time(method, alignment):
    plan = dispatched(method, alignment)
    assert step_plan_to_dict(plan)["pipelines"] == eager_pipelines(plan)


@pytest.mark.parametrize("method", [BatchingMethod.DISPATCH_BALANCED_PACKING, BatchingMethod.PADDING])
def test_a_dispatched_plan_round_trips(method):
    plan = dispatched(method, 8)
    document = json.loads(json.dumps(step_plan_to_dict(plan)))
    assert document["schema_version"] == 1
    assert step_plan_from_dict(document) == plan


def test_a_version_1_file_without_derived_fields_loads():
    document = {"schema_version": 1, "kind": "step_plan", "strategy_index": 0, "method": "dispatch_balanced_packing",
                "predicted_ms": 9.0, "lower_bound_ms": 8.0, "planning_ms": 1.0, "notes": [],
                "pipelines": [{"scheme": {"cp": 1, "tp": 2, "pp": 1}, "max_seq_len": 100, "predicted_ms": 9.0,
                               "micro_batches": [{"sequences": [1, 0], "lengths": [30, 20]}, {"sequences": [2],
                                                                                             "lengths": [7]}]},
                              {"scheme": {"cp": 1, "tp": 2, "pp": 1}, "max_seq_len": 100, "predicted_ms": 0.0,
                               "solver_status": "idle", "micro_batches": []}]}
    plan = step_plan_from_dict(document)
    assert [len(p.micro_batches) for p in plan.pipelines] == [2, 0]
    assert plan.pipelines[0].micro_batches[0].sequences == (1, 0)
    assert len(plan.pipelines.classes) == 1 and plan.pipelines.classes[0].count == 2
    assert step_plan_from_dict(step_plan_to_dict(plan)) == plan


@pytest.mark.parametrize(("key", "value", "message"), [
    ("lengths", [5], r"pipelines\[1\].micro_batches\[0\].lengths: 1 must have one entry per sequence \(2\)"),
    ("cu_seqlens", [0, 4000, 7000], r"pipelines\[1\].micro_batches\[0\].cu_seqlens: \[0, 4000, 7000\] disagrees"),
    ("sequences", [1, "x"], r"pipelines\[1\].micro_batches\[0\].sequences\[1\]: 'x' must be an integer"),
])
def test_micro_batch_errors_name_the_entry(key, value, message):
    document = step_plan_to_dict(HAND_PLAN)
    document["pipelines"][1]["micro_batches"][0][key] = value
    with pytest.raises(HydraulisError, match=message):
        step_plan_from_dict(document)

