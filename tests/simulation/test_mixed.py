"""The mixed-cluster simulation: four contenders on the same steps, never below the bound."""

import numpy as np
import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.workload import sample_batches
from hydraulis.planner.evaluate import estimate_step
from hydraulis.planner.mixed import (
    MixedSearchConfig,
    cost_context,
    mixed_proposal,
    plan_mixed,
    plan_mixed_ranges,
    strategy_of,
)
from hydraulis.planner.mixed_options import OptionsConfig, mixed_options
from hydraulis.planner.mixed_propose import MixedPlannerConfig, propose_mixed
from hydraulis.simulation.mixed import MixedContender, MixedSimulationConfig, simulate_mixed
from tests.conftest import mixed_cluster_spaces

LENGTHS = "examples/data/longtail.txt"


@pytest.fixture(scope="module")
def simulation():
    config = MixedSimulationConfig(MixedPlannerConfig(200_000, 32_768, steps=3, evaluations=40, cps=(2, 4),
                                                      budgets=(8,), targets=(1.0,)), steps=3)
    return simulate_mixed(mixed_cluster_spaces(), read_lengths(LENGTHS), config)


def test_every_contender_runs_every_step_above_the_bound(simulation):
    assert [r.contender for r in simulation.results] == list(MixedContender)
    for result in simulation.results:
        assert len(result.step_ms) == 3
        assert all(t >= e - 1e-6 and e >= b for t, e, b in zip(result.step_ms, result.exact_ms, simulation.bound_ms))
        assert simulation.ratio(result) >= simulation.exact_ratio(result) - 1e-9 and simulation.exact_ratio(result) >= 1
    assert simulation.fastest_group == "h100"
    homogeneous = simulation.results[-1].strategy
    assert "a100" not in homogeneous and "h100" in homogeneous


def test_the_mixed_search_never_judges_worse_than_its_starts():
    spaces = mixed_cluster_spaces()
    options = mixed_options(spaces, OptionsConfig(32_768, cps=(4,), budgets=(8,), targets=(1.0,)))
    steps = sample_batches(read_lengths(LENGTHS), 200_000, 2, 32_768, 0)
    first = next(k for k, o in enumerate(options) if o.cross and o.max_seq_len >= 32_768)
    start = strategy_of(options, [2 * (k == first) for k in range(len(options))])
    plan = plan_mixed(spaces, options, steps, MixedSearchConfig(32_768, evaluations=30), starts=(start,))
    context = cost_context(spaces)
    judged = float(np.mean([estimate_step(start, s, context).step_ms for s in steps]))
    assert plan.mean_ms <= judged + 1e-9
    used = np.array([o.usage for o in plan.options]).T @ np.array(plan.counts)
    assert all(used <= [16, 16]) and plan.strategy.max_seq_len >= 32_768


def test_ranges_give_a_strategy_per_serving_range():
    spaces = mixed_cluster_spaces()
    options = mixed_options(spaces, OptionsConfig(32_768, cps=(2, 4), budgets=(8,), targets=(1.0,)))
    steps = sample_batches(read_lengths(LENGTHS), 200_000, 8, 32_768, 0)
    plans = plan_mixed_ranges(spaces, options, steps, MixedSearchConfig(32_768, evaluations=40), (1.0, 0.5),
                              min_steps=1)
    assert plans[0].strategy.max_seq_len >= 32_768
    assert all(p.strategy.max_seq_len >= 16_384 for p in plans)
    proposal = mixed_proposal(spaces, [p.strategy for p in plans], 200_000, 32_768)
    assert [s.serves_to for s in proposal.strategies][0] == 32_768


def test_propose_mixed_makes_a_proposal_dispatch_can_run():
    config = MixedPlannerConfig(200_000, 32_768, steps=3, evaluations=30, cps=(4,), budgets=(8,), targets=(1.0,),
                                ranges=(1.0,))
    proposal = propose_mixed(mixed_cluster_spaces(), read_lengths(LENGTHS), config)
    assert proposal.devices == 32 and proposal.strategies[0].strategy.max_seq_len >= 32_768
    assert all(stage.group in ("a100", "h100") for group in proposal.strategies[0].strategy.pipelines
               for stage in group.scheme.stages)
