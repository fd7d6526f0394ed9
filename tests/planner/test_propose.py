"""The whole recipe on the 7B reference pool and the bundled long-tail lengths."""

from dataclasses import replace
import numpy as np
import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.cost import scheme_capacities
from hydraulis.errors import HydraulisError
from hydraulis.planner import PlannerConfig, SolverName, propose, validate_proposal
from hydraulis.planner.evaluate import CostContext, estimate_step
from hydraulis.planner.options import planning_space
from hydraulis.types import PipelineGroup, Strategy
from hydraulis.workload import sample_batches
from tests.planner.instances import LENGTHS

CONFIG = PlannerConfig(devices=32, devices_per_node=8, token_budget=65536, max_seq_len=32768, strategies=4, steps=24)


@pytest.fixture(scope="module")
def lengths():
    return read_lengths(LENGTHS)


@pytest.fixture(scope="module")
def made(space_7b, lengths):
    return propose(space_7b, lengths, CONFIG)


def test_the_proposal_is_valid_and_covers_the_range(made, space_7b):
    validate_proposal(made, space_7b)
    assert 1 <= len(made.strategies) <= CONFIG.strategies
    assert made.strategies[0].serves_from == 0 and made.strategies[-1].serves_to == CONFIG.max_seq_len
    for proposed in made.strategies:
        assert proposed.strategy.devices <= CONFIG.devices
        assert proposed.predicted_ms > proposed.reduce_ms >= 0
        assert all(h >= 0 for h in proposed.headroom_bytes)
        assert "sampled steps" in proposed.explanation
    assert made.solver.status in ("optimal", "time_limit") and made.solver.wall_ms > 0
    assert "optimizer layout dp32·tp1·pp1" in made.explanation


def test_no_worse_than_any_homogeneous_strategy_on_the_same_steps(made, space_7b, lengths):
    """The acceptance comparison: same cost model, same sampled steps, every homogeneous
    strategy that holds the maximum length."""
    space = planning_space(space_7b, CONFIG.devices, CONFIG.devices_per_node)
    steps = sample_batches(lengths, CONFIG.token_budget, CONFIG.steps, CONFIG.max_seq_len, CONFIG.seed)
    context = CostContext(space.model.params, made.optimizer_layout, space.reduce_gbps, space.pipeline_model)

    def serving(step):
        return next(p.strategy for p in made.strategies if p.serves_from < step.max() <= p.serves_to)

    proposal_ms = np.mean([estimate_step(serving(s), s, context).step_ms for s in steps])
    homogeneous = []
    for capacity in scheme_capacities(space, made.optimizer_layout):
        if capacity.max_seq_len >= CONFIG.max_seq_len:
            group = PipelineGroup(capacity.profile.scheme, CONFIG.devices // capacity.profile.scheme.devices,
                                  capacity.max_seq_len, capacity.profile.time)
            homogeneous.append(np.mean([estimate_step(Strategy((group,)), s, context).step_ms for s in steps]))
    assert proposal_ms <= min(homogeneous) * (1 + 1e-9)
    weighted = sum(p.predicted_ms * np.sum([p.serves_from < s.max() <= p.serves_to for s in steps])
                   for p in made.strategies) / len(steps)
    assert weighted == pytest.approx(proposal_ms)


def test_the_same_seed_gives_the_same_proposal(made, space_7b, lengths):
    again = propose(space_7b, lengths, CONFIG)
    assert [p.strategy for p in again.strategies] == [p.strategy for p in made.strategies]
    assert [p.predicted_ms for p in again.strategies] == [p.predicted_ms for p in made.strategies]


def test_highs_solves_it_too(space_7b, lengths):
    made = propose(space_7b, lengths, replace(CONFIG, solver=SolverName.HIGHS, strategies=2, steps=12))
    validate_proposal(made, space_7b)


@pytest.mark.parametrize("change, message", [
    ({"devices": 1, "devices_per_node": 1}, "devices: 1 is smaller than every scheme of the space (the smallest uses 2"),
    ({"max_seq_len": 200_000, "token_budget": 400_000}, "max_seq_len: 200000 exceeds the longest sequence any scheme"),
])
def test_impossible_requests_name_the_field(space_7b, lengths, change, message):
    with pytest.raises(HydraulisError) as error:
        propose(space_7b, lengths, replace(CONFIG, **change))
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("change, message", [
    ({"strategies": 0}, "strategies: 0 must be >= 1"),
    ({"devices": 12}, "devices: 12 must fill whole nodes: a multiple of devices_per_node = 8"),
    ({"token_budget": 1000}, "token_budget: 1000 is smaller than one sequence of max_seq_len = 32768 tokens"),
    ({"tolerance": 0.0}, "tolerance: 0.0 must be > 0"),
])
def test_bad_configurations(change, message):
    with pytest.raises(HydraulisError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(CONFIG, **change)


def test_bad_lengths(space_7b):
    with pytest.raises(HydraulisError, match=r"lengths\[1\]: -5 must be a positive length"):
        propose(space_7b, [100, -5], CONFIG)
