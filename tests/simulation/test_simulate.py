"""The simulation recipe on a small instance, against brute force and the bounds."""

from __future__ import annotations

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.workload import sample_batches
from hydraulis.dispatch import dispatch
from hydraulis.planner import PlannerConfig, validate_proposal
from hydraulis.planner.options import proposal_options
from hydraulis.simulation import Contender, Family, SimulationConfig, simulate
from hydraulis.simulation.contenders import homogeneous_candidates, static_candidates
from tests.simulation.conftest import small_config


def held_out_steps(config: SimulationConfig, lengths) -> list[np.ndarray]:
    planner = config.planner
    return sample_batches(lengths, planner.token_budget, config.steps, planner.max_seq_len, planner.seed + 1)


def test_every_contender_plans_every_step_in_order(small_simulation):
    assert [r.contender for r in small_simulation.runs] == list(Contender)
    assert len(small_simulation.steps) == 4
    for run in small_simulation.runs:
        assert len(run.outcomes) == 4
        first = -1 if run.contender is Contender.HYDRAULIS else 0
        assert all(first <= o.strategy_index < len(run.proposal.strategies) for o in run.outcomes)
        assert all(o.planning_ms > 0 for o in run.outcomes)


def test_steps_are_the_held_out_batches(small_simulation, lengths):
    batches = held_out_steps(small_simulation.config, lengths)
    assert [(s.sequences, s.tokens, s.longest) for s in small_simulation.steps] == \
        [(b.size, int(b.sum()), int(b.max())) for b in batches]
    planner_steps = sample_batches(lengths, 40_000, 4, 16_384, 0)
    assert any(not np.array_equal(a, b) for a, b in zip(batches, planner_steps))


def test_every_plan_lies_above_every_lower_bound(small_simulation):
    for run in small_simulation.runs:
        for outcome, step in zip(run.outcomes, small_simulation.steps):
            assert outcome.predicted_ms >= outcome.lower_bound_ms * (1 - 1e-9)
            assert outcome.predicted_ms >= step.tight_bound_ms * (1 - 1e-9)
            assert step.tight_bound_ms >= step.pool_bound_ms * (1 - 1e-9) >= step.work_bound_ms * (1 - 1e-9)


def test_synthesis_is_never_slower_and_its_communicators_stay_within_the_bound(small_simulation):
    hydraulis = small_simulation.run(Contender.HYDRAULIS).predicted_ms
    proposal_only = small_simulation.run(Contender.PROPOSAL_BALANCED_PACKING).predicted_ms
    assert np.all(hydraulis <= proposal_only)
    counted = small_simulation.communicators
    assert 0 < counted.proposal <= counted.run <= counted.bound
    assert [g.predicted_ms for g in small_simulation.gaps] == pytest.approx(list(hydraulis))


def test_hydraulis_is_never_slower_than_the_static_strategy_on_any_step(small_simulation):
    hydraulis = small_simulation.run(Contender.HYDRAULIS).predicted_ms
    static = small_simulation.run(Contender.STATIC_HETEROGENEOUS).predicted_ms
    assert np.all(hydraulis <= static * (1 + 1e-9))


@pytest.mark.parametrize("contender", [c for c in Contender if c.family is Family.HOMOGENEOUS])
def test_homogeneous_baseline_is_the_best_homogeneous_strategy_by_brute_force(small_simulation, small_space,
                                                                              lengths, contender):
    proposal = small_simulation.proposal
    batches = held_out_steps(small_simulation.config, lengths)
    means = {}
    for candidate in homogeneous_candidates(small_space, proposal, proposal_options(small_space, proposal)):
        means[candidate.strategies[0].strategy] = np.mean(
            [dispatch(candidate, b, contender.method).predicted_ms for b in batches])
    run = small_simulation.run(contender)
    assert run.candidates == len(means) > 1
    assert run.predicted_ms.mean() == pytest.approx(min(means.values()))
    assert means[run.proposal.strategies[0].strategy] == pytest.approx(min(means.values()))
    assert run.proposal.strategies[0].predicted_ms == pytest.approx(min(means.values()))


def test_homogeneous_candidates_hold_the_maximum_length_fit_memory_and_fill_the_cluster(small_simulation,
                                                                                       small_space):
    proposal = small_simulation.proposal
    candidates = homogeneous_candidates(small_space, proposal, proposal_options(small_space, proposal))
    for candidate in candidates:
        (proposed,) = candidate.strategies
        (group,) = proposed.strategy.pipelines
        assert group.max_seq_len >= proposal.max_seq_len
        assert group.count == proposal.devices // group.scheme.devices
        assert candidate.optimizer_layout == proposal.optimizer_layout
        validate_proposal(candidate, small_space)


def test_static_candidates_are_the_proposal_strategies_serving_every_step(small_simulation, small_space):
    proposal = small_simulation.proposal
    candidates = static_candidates(proposal)
    holders = [p.strategy for p in proposal.strategies if p.strategy.max_seq_len >= proposal.max_seq_len]
    assert [c.strategies[0].strategy for c in candidates] == holders
    for candidate in candidates:
        assert (candidate.strategies[0].serves_from, candidate.strategies[0].serves_to) == (0, proposal.max_seq_len)
        validate_proposal(candidate, small_space)


def test_a_maximum_length_no_scheme_holds_is_named(small_space, lengths):
    config = SimulationConfig(PlannerConfig(devices=16, devices_per_node=8, token_budget=400_000,
                                            max_seq_len=200_000, strategies=2, steps=4), steps=1)
    with pytest.raises(HydraulisError) as error:
        simulate(small_space, lengths, config)
    assert error.value.field == "max_seq_len"


def test_the_configuration_is_validated_and_resolved():
    with pytest.raises(HydraulisError) as error:
        small_config(steps=0)
    assert error.value.field == "steps"
    resolved = small_config().to_dict()
    assert resolved["steps"] == 4 and resolved["step_seed"] == 1
    assert resolved["planner"]["devices"] == 16 and resolved["dispatch"]["oversize"] == "error"
