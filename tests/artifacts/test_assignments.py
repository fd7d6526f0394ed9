"""The step-assignments artifact: written, read back equal, valid under the shipped JSON Schema;
every bad field named by its path."""

import copy
import json

import pytest

from hydraulis.artifacts.assignments import (
    assignments_from_dict,
    assignments_lines,
    assignments_schema,
    assignments_to_dict,
    read_assignments,
    read_assignments_lines,
    write_assignments,
    write_assignments_lines,
)
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod, MicroBatch, PipelinePlan, Scheme, StepPlan
from hydraulis.dispatch.assigned_steps import AssignedStep
from hydraulis.dispatch.assignments import step_assignments
from tests.artifacts.schema_check import violations

LENGTHS = (9, 3, 4, 7)
IDS = ("doc-a", "doc-b", 17, "doc-d")


def assignments(step: int = 0):
    """``1×(2,1,1) + 1×(1,1,2)`` on 5 devices: ranks 0, 1 the cp pipeline, 2, 3 the two stages, 4 idle."""
    plan = StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 1.0, 1.0, 0.0, (
        PipelinePlan(Scheme(2, 1, 1), 100, (MicroBatch((0,), (9,)), MicroBatch((3,), (7,))), 1.0),
        PipelinePlan(Scheme(1, 1, 2), 100, (MicroBatch((2, 1), (4, 3)),), 1.0)))
    return AssignedStep(step, IDS, step_assignments(plan, LENGTHS, devices=5), 0, "1×(2,1,1) + 1×(1,1,2)", 12.5,
                        (10.0, 8.0), (((0, 4),), ((0, 2), (2, 4))))


def test_round_trip(tmp_path):
    path = tmp_path / "a.json"
    write_assignments(path, assignments())
    assert read_assignments(path) == assignments()
    document = json.loads(path.read_text())
    assert document["kind"] == "step_assignments" and document["schema_version"] == 2
    assert document["ranks"][1] == {"rank": 1, "pipeline": 0, "stage": 0, "cp_rank": 1, "tp_rank": 0, "cp": 2,
                                    "tp": 1, "pp": 1, "layers": [0, 4], "predicted_ms": 10.0,
                                    "micro_batches": [["doc-a"], ["doc-d"]]}
    assert document["ranks"][2]["micro_batches"] == [[17, "doc-b"]]
    assert [r["stage"] for r in document["ranks"]] == [0, 0, 0, 1]
    assert [r["layers"] for r in document["ranks"]] == [[0, 4], [0, 4], [0, 2], [2, 4]]
    assert document["strategy"] == {"index": 0, "name": "1×(2,1,1) + 1×(1,1,2)"}
    assert violations(document, assignments_schema()) == []


def test_several_steps_as_json_lines(tmp_path):
    steps = (assignments(0), assignments(1))
    path = tmp_path / "a.jsonl"
    write_assignments_lines(path, steps)
    assert read_assignments_lines(path) == steps
    assert len(assignments_lines(steps).splitlines()) == 2


def test_the_schema_rejects_what_the_reader_rejects():
    schema = assignments_schema()
    document = assignments_to_dict(assignments())
    for edit in (lambda d: d.pop("samples"), lambda d: d.update(extra=1), lambda d: d["ranks"][0].update(rank=-1),
                 lambda d: d["samples"][0].update(id=[1]), lambda d: d["strategy"].update(index="x")):
        broken = copy.deepcopy(document)
        edit(broken)
        assert violations(broken, schema)


def _broken(edit):
    document = copy.deepcopy(assignments_to_dict(assignments()))
    edit(document)
    return document


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(kind="step_plan"), "kind: 'step_plan' is not a step_assignments artifact"),
    (lambda d: d.update(schema_version=1), "schema_version: 1 is not supported"),
    (lambda d: d["ranks"][3]["micro_batches"][0].__setitem__(1, "x"), r"ranks\[3\].micro_batches\[0\]\[1\]: 'x' is not a"),
    (lambda d: d["ranks"][3]["micro_batches"][0].__setitem__(1, 9), r"ranks\[3\].micro_batches\[0\]\[1\]: 9 is not a"),
    (lambda d: d["ranks"][2].update(micro_batches=7), r"ranks\[2\].micro_batches: 7 must be a list"),
    (lambda d: d["ranks"][0].update(layers=[0, 2]), r"ranks\[0\].layers: \[0, 2\] disagrees"),
    (lambda d: d["ranks"][3].update(predicted_ms=1.0), r"ranks\[3\].predicted_ms: 1.0 disagrees"),
    (lambda d: d["samples"][1].update(id="doc-a"), "samples: 4 repeat an id"),
    (lambda d: d["ranks"][2]["micro_batches"].__setitem__(0, 3), r"ranks\[2\].micro_batches\[0\]: 3 must be a list"),
    (lambda d: d["ranks"][0].update(cp=1), r"ranks\[0\].cp: 1 disagrees with pipeline 0's scheme"),
    (lambda d: d["ranks"][3].update(pp=1), r"ranks\[3\].pp: 1 disagrees"),
    (lambda d: d["ranks"][0].pop("tp_rank"), r"ranks\[0\].tp_rank: None is missing"),
    (lambda d: d["ranks"][0].update(cp_rank=-1), r"ranks\[0\].cp_rank: -1 must be >= 0"),
    (lambda d: d["ranks"][0].update(pipeline=4), r"ranks\[0\].pipeline: 4 must be below the 2 pipelines"),
    (lambda d: d["pipelines"][1]["scheme"].update(tp=0), r"pipelines\[1\].scheme.tp"),
    (lambda d: d["samples"][2].update(length=0), r"lengths\[2\]: 0 must be >= 1"),
    (lambda d: d.update(devices=3), "need more than the 3 there are"),
])
def test_every_bad_field_is_named(edit, message):
    with pytest.raises(HydraulisError, match=message):
        assignments_from_dict(_broken(edit))
