import json
from dataclasses import replace

import pytest

from hydraulis.artifacts import (
    proposal_from_dict,
    proposal_to_dict,
    read_proposal,
    read_step_plan,
    step_plan_from_dict,
    step_plan_to_dict,
    write_proposal,
    write_step_plan,
)
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import (
    LOSS_CHUNK_TOKENS,
    BatchingMethod,
    MicroBatch,
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    PipelinePlan,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    StepPlan,
    Strategy,
    TimeCoefficients,
)


def make_proposal() -> Proposal:
    small = PipelineGroup(Scheme(1, 2, 1), 6, 8192, TimeCoefficients(2e-6, 0.097, 65.2))
    large = PipelineGroup(Scheme(2, 4, 1), 1, 65536, TimeCoefficients(5e-7, 0.03, 60.0))
    return Proposal(
        model=model_preset("llama-7b"), devices=32, devices_per_node=8,
        optimizer_layout=OptimizerLayout(8, 4, 1),
        strategies=(
            ProposedStrategy(Strategy((small,)), 0, 8192, 812.5, 40.0, (10**9,), "short steps"),
            ProposedStrategy(Strategy((large, small)), 8192, 65536, 1503.25, 40.0, (2 * 10**9, 10**9), "long"),
        ),
        token_budget=200_000, max_seq_len=65536, pipeline_model=PipelineModel(p2p_ms=0.03),
        solver=SolverReport("optimal", "cbc", 812.0, ""),
    )


def make_step_plan() -> StepPlan:
    return StepPlan(
        strategy_index=1, method=BatchingMethod.DISPATCH_BALANCED_PACKING, predicted_ms=1500.0,
        lower_bound_ms=1300.5, planning_ms=3.25,
        pipelines=(PipelinePlan(Scheme(2, 4, 1), 65536, (MicroBatch((0,), (40000,)),), 1400.0, "optimal"),
                   PipelinePlan(Scheme(1, 2, 1), 8192, (MicroBatch((1, 2), (4000, 3001)), MicroBatch((3,), (7,))),
                                1200.0, "greedy")),
        alignment=8, seed=7, notes=("ilp skipped: time limit 0",),
    )


def test_proposal_round_trip(tmp_path):
    proposal = make_proposal()
    write_proposal(tmp_path / "p.json", proposal, config={"lengths": "x.txt"})
    assert read_proposal(tmp_path / "p.json") == proposal
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["strategies"][1]["devices"] == 20
    assert document["strategies"][0]["pipelines"][0]["scheme"] == {"cp": 1, "tp": 2, "pp": 1}
    assert document["optimizer_layout"] == {"dp": 8, "tp": 4, "pp": 1}
    assert document["config"] == {"lengths": "x.txt"}


def test_step_plan_round_trip(tmp_path):
    plan = make_step_plan()
    write_step_plan(tmp_path / "s.json", plan)
    assert read_step_plan(tmp_path / "s.json") == plan
    document = json.loads((tmp_path / "s.json").read_text())
    assert document["pipelines"][1]["micro_batches"][0]["cu_seqlens"] == [0, 4000, 7008]
    assert document["pipelines"][1]["micro_batches"][0]["tokens"] == 7001


def test_proposal_devices_must_agree_with_pipelines():
    document = proposal_to_dict(make_proposal())
    document["strategies"][0]["devices"] = 13
    with pytest.raises(HydraulisError, match=r"strategies\[0\]\.devices: 13 disagrees with its pipelines"):
        proposal_from_dict(document)


def test_step_plan_checks_derived_fields():
    document = step_plan_to_dict(make_step_plan())
    document["pipelines"][0]["micro_batches"][0]["tokens"] = 5
    with pytest.raises(HydraulisError, match=r"micro_batches\[0\]\.tokens: 5 disagrees"):
        step_plan_from_dict(document)
    document = step_plan_to_dict(make_step_plan())
    document["method"] = "magic"
    with pytest.raises(HydraulisError, match="method: 'magic' must be one of"):
        step_plan_from_dict(document)


def test_the_loss_chunk_a_proposal_was_priced_with_round_trips_and_defaults_to_the_runtimes(tmp_path):
    proposal = replace(make_proposal(), loss_chunk_tokens=0)
    write_proposal(tmp_path / "p.json", proposal)
    assert read_proposal(tmp_path / "p.json").loss_chunk_tokens == 0
    document = json.loads((tmp_path / "p.json").read_text())
    del document["loss_chunk_tokens"]
    (tmp_path / "old.json").write_text(json.dumps(document))
    assert read_proposal(tmp_path / "old.json").loss_chunk_tokens == LOSS_CHUNK_TOKENS == 1024
