import pytest

from hydraulis.artifacts.fused import (
    fused_problem_from_dict,
    fused_problem_to_dict,
    fused_schedule_from_dict,
    fused_schedule_to_dict,
)
from hydraulis.base.errors import HydraulisError
from hydraulis.fused import FusedProblem, FuseOptions, fuse, fused_model, fused_schedule
from tests.fused.helpers import two_models


def test_problem_round_trips_in_its_compact_form():
    problem = FusedProblem(4, (fused_model("a", 4, 1, "forward", 2, [1.0, 2.0]),
                               fused_model("b", 2, 2, "reverse", [1, 2], [[1.0], [2.0, 3.0]], None, 0.5)))
    document = fused_problem_to_dict(problem)
    assert document["models"][0]["forward_ms"] == [1.0, 2.0]
    assert document["models"][1]["micro_batches"] == [1, 2]
    assert fused_problem_from_dict(document) == problem


def test_schedule_round_trips_with_the_issue_fields():
    schedule = fused_schedule(fuse(two_models(4, 2, 2), FuseOptions(evaluations=2_000)))
    document = fused_schedule_to_dict(schedule, {"seed": 0})
    for key in ("schema_version", "makespan_ms", "lower_bound_ms", "sequential_ms", "greedy_ms", "peak_memory"):
        assert key in document
    assert set(document["tasks"][0]) == {"device", "model", "replica", "micro_batch", "stage", "phase", "start_ms",
                                         "end_ms"}
    assert fused_schedule_from_dict(document) == schedule


def test_bad_problem_document_names_the_field():
    document = fused_problem_to_dict(two_models(4, 2, 2))
    document["models"][0]["micro_batches"] = 0
    with pytest.raises(HydraulisError, match=r"models\[0\]\.micro_batches"):
        fused_problem_from_dict(document)
