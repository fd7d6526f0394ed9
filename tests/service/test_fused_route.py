from fastapi.testclient import TestClient

from hydraulis.artifacts.fused import fused_problem_to_dict, fused_schedule_from_dict
from hydraulis.fused import check_schedule
from hydraulis.service.app import create_app
from tests.fused.helpers import two_models


def test_fused_schedule_route_answers_a_checked_schedule():
    problem = two_models(4, 2, 3)
    response = TestClient(create_app()).post("/v1/fused-schedules",
                                             json={"problem": fused_problem_to_dict(problem), "time_limit_s": 5})
    assert response.status_code == 200
    schedule = fused_schedule_from_dict(response.json())
    assert check_schedule(problem, schedule.tasks) == []
    assert schedule.lower_bound_ms <= schedule.makespan_ms <= schedule.sequential_ms


def test_fused_schedule_route_names_the_bad_field():
    document = fused_problem_to_dict(two_models(4, 2, 3))
    document["models"][1]["placement"] = "sideways"
    response = TestClient(create_app()).post("/v1/fused-schedules", json={"problem": document})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "models[1].placement"
