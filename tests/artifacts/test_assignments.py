"""The step-assignments artifact: written, read back equal; every bad field named by its path."""

import copy
import json

import pytest

from hydraulis.artifacts.assignments import (
    assignments_from_dict,
    assignments_to_dict,
    read_assignments,
    write_assignments,
)
from hydraulis.dispatch.assignments import step_assignments
from hydraulis.errors import HydraulisError
from hydraulis.types import BatchingMethod, MicroBatch, PipelinePlan, Scheme, StepPlan

LENGTHS = (9, 3, 4, 7)


def assignments():
    """``1×(2,1,1) + 1×(1,1,2)`` on 5 devices: ranks 0, 1 the cp pipeline, 2, 3 the two stages, 4 idle."""
    plan = StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 1.0, 1.0, 0.0, (
        PipelinePlan(Scheme(2, 1, 1), 100, (MicroBatch((0,), (9,)), MicroBatch((3,), (7,))), 1.0),
        PipelinePlan(Scheme(1, 1, 2), 100, (MicroBatch((2, 1), (4, 3)),), 1.0)))
    return step_assignments(plan, LENGTHS, devices=5)


def test_round_trip(tmp_path):
    path = tmp_path / "a.json"
    write_assignments(path, assignments())
    assert read_assignments(path) == assignments()
    document = json.loads(path.read_text())
    assert document["kind"] == "step_assignments" and document["schema_version"] == 1
    assert document["ranks"][1] == {"rank": 1, "pipeline": 0, "stage": 0, "cp_rank": 1, "tp_rank": 0, "cp": 2,
                                    "tp": 1, "pp": 1, "micro_batches": [[0], [3]]}
    assert [r["stage"] for r in document["ranks"]] == [0, 0, 0, 1]


def _broken(edit):
    document = copy.deepcopy(assignments_to_dict(assignments()))
    edit(document)
    return document


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(kind="step_plan"), "kind: 'step_plan' is not a step_assignments artifact"),
    (lambda d: d.update(schema_version=2), "schema_version: 2 is not supported"),
    (lambda d: d["ranks"][3]["micro_batches"][0].__setitem__(1, "x"), r"ranks\[3\].micro_batches\[0\]\[1\]: 'x'"),
    (lambda d: d["ranks"][3]["micro_batches"][0].__setitem__(1, 9), r"ranks\[3\].micro_batches\[0\]\[1\]: 9 must be"),
    (lambda d: d["ranks"][2].update(micro_batches=7), r"ranks\[2\].micro_batches: 7 must be a list"),
    (lambda d: d["ranks"][2]["micro_batches"].__setitem__(0, 3), r"ranks\[2\].micro_batches\[0\]: 3 must be a list"),
    (lambda d: d["ranks"][0].update(cp=1), r"ranks\[0\].cp: 1 disagrees with pipeline 0's scheme"),
    (lambda d: d["ranks"][3].update(pp=1), r"ranks\[3\].pp: 1 disagrees"),
    (lambda d: d["ranks"][0].pop("tp_rank"), r"ranks\[0\].tp_rank: None is missing"),
    (lambda d: d["ranks"][0].update(cp_rank=-1), r"ranks\[0\].cp_rank: -1 must be >= 0"),
    (lambda d: d["ranks"][0].update(pipeline=4), r"ranks\[0\].pipeline: 4 must be below the 2 pipelines"),
    (lambda d: d["pipelines"][1]["scheme"].update(tp=0), r"pipelines\[1\].scheme.tp"),
    (lambda d: d.update(lengths=[9, 3, 0, 7]), r"lengths\[2\]: 0 must be >= 1"),
    (lambda d: d.update(devices=3), "need more than the 3 there are"),
])
def test_every_bad_field_is_named(edit, message):
    with pytest.raises(HydraulisError, match=message):
        assignments_from_dict(_broken(edit))
