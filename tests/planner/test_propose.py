"""The whole recipe on the 7B original pool and the bundled long-tail lengths."""

from dataclasses import replace

import numpy as np
import pytest

from hydraulis.artifacts import read_lengths
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import PipelineGroup, Scheme, Strategy
from hydraulis.base.workload import sample_batches
from hydraulis.cost import scheme_capacities
from hydraulis.planner import PlannerConfig, SolverName, propose, validate_proposal
from hydraulis.planner.distribution import step_statistics
from hydraulis.planner.evaluate import CostContext, estimate_step
from hydraulis.planner.layout import choose_optimizer_layout
from hydraulis.planner.options import planning_space, scheme_options
from hydraulis.planner.propose import Judge, best_homogeneous, design_range, strategy_of
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
    assert made.solver.status == "optimal" and made.solver.wall_ms > 0
    assert "optimizer layout dp32·tp1·pp1" in made.explanation


def sampled_steps_and_context(space, proposal, lengths, config):
    space = planning_space(space, config.devices, config.devices_per_node)
    steps = sample_batches(lengths, config.token_budget, config.steps, config.max_seq_len, config.seed)
    return steps, CostContext(space.model.params, proposal.optimizer_layout, space.reduce_gbps, space.pipeline_model)


def proposal_mean_ms(proposal, steps, context):
    """Mean judged step time of ``proposal`` over ``steps``, each on the strategy serving it."""
    def serving(step):
        return next(p.strategy for p in proposal.strategies if p.serves_from < step.max() <= p.serves_to)

    return float(np.mean([estimate_step(serving(s), s, context).step_ms for s in steps]))


def test_no_worse_than_any_homogeneous_strategy_on_the_same_steps(made, space_7b, lengths):
    """The acceptance comparison: same cost model, same sampled steps, every homogeneous
    strategy that holds the maximum length."""
    steps, context = sampled_steps_and_context(space_7b, made, lengths, CONFIG)
    proposal_ms = proposal_mean_ms(made, steps, context)
    homogeneous = []
    space = planning_space(space_7b, CONFIG.devices, CONFIG.devices_per_node)
    for capacity in scheme_capacities(space, made.optimizer_layout):
        if capacity.max_seq_len >= CONFIG.max_seq_len:
            group = PipelineGroup(capacity.profile.scheme, CONFIG.devices // capacity.profile.scheme.devices,
                                  capacity.max_seq_len, capacity.profile.time)
            homogeneous.append(np.mean([estimate_step(Strategy((group,)), s, context).step_ms for s in steps]))
    assert proposal_ms <= min(homogeneous) * (1 + 1e-9)
    weighted = sum(p.predicted_ms * np.sum([p.serves_from < s.max() <= p.serves_to for s in steps])
                   for p in made.strategies) / len(steps)
    assert weighted == pytest.approx(proposal_ms)


def test_at_scale_the_local_search_is_no_worse_than_the_programs_and_a_hand_made_two_group_strategy(space_32b_analytic,
                                                                                        lengths):
    """LLaMA-32B, 1024 devices, 1.6M tokens: with the local search the planner is no worse than
    the fluid programs' answer nor than the hand-made 8×(8,8,1) + 64×(1,8,1)
    (examples/proposals/32b_1024dev.json) on the same steps."""
    config = PlannerConfig(devices=1024, devices_per_node=8, token_budget=1_600_000, max_seq_len=32768, steps=24)
    searched = propose(space_32b_analytic, lengths, config)
    programs_only = propose(space_32b_analytic, lengths, replace(config, search_evaluations=0))
    steps, context = sampled_steps_and_context(space_32b_analytic, searched, lengths, config)
    capacity = {c.profile.scheme: c for c in scheme_capacities(planning_space(space_32b_analytic, 1024, 8),
                                                               searched.optimizer_layout)}
    hand_made = Strategy(tuple(PipelineGroup(s, n, capacity[s].max_seq_len, capacity[s].profile.time)
                               for s, n in ((Scheme(8, 8, 1), 8), (Scheme(1, 8, 1), 64))))
    hand_made_ms = float(np.mean([estimate_step(hand_made, s, context).step_ms for s in steps]))
    assert proposal_mean_ms(searched, steps, context) <= hand_made_ms * (1 + 1e-9)
    assert proposal_mean_ms(searched, steps, context) <= proposal_mean_ms(programs_only, steps, context) * (1 + 1e-9)
    validate_proposal(searched, space_32b_analytic)
    assert "local search" in searched.strategies[0].explanation


@pytest.mark.parametrize("token_budget, lo, hi", [(65536, 0, 32768), (131072, 14690, 32768), (131072, 0, 14690)])
def test_a_range_keeps_a_strategy_no_worse_than_the_programs_answers_and_the_baseline(space_7b, lengths,
                                                                                       token_budget, lo, hi):
    config = replace(CONFIG, token_budget=token_budget)
    space = planning_space(space_7b, config.devices, config.devices_per_node)
    layout, _ = choose_optimizer_layout(space, config.max_seq_len)
    options, _ = scheme_options(space, layout, config.node_size)
    steps = sample_batches(lengths, config.token_budget, config.steps, config.max_seq_len, config.seed)
    stats = step_statistics(steps, config.bucket_width, config.max_seq_len)
    judge = Judge(steps, CostContext(space.model.params, layout, space.reduce_gbps, space.pipeline_model))
    baseline = best_homogeneous(options, stats, judge, space, config)
    design = design_range(lo, hi, stats, options, judge, baseline, space, config)
    kept = judge.mean_ms(design.strategy, design.steps)
    assert design.strategy.max_seq_len >= hi
    assert kept <= judge.mean_ms(baseline, design.steps)
    for counts, _ in design.answer.found:
        assert kept <= judge.mean_ms(strategy_of(options, counts), design.steps)


def test_the_same_seed_gives_the_same_proposal(made, space_7b, lengths):
    again = propose(space_7b, lengths, CONFIG)
    assert [p.strategy for p in again.strategies] == [p.strategy for p in made.strategies]
    assert [p.predicted_ms for p in again.strategies] == [p.predicted_ms for p in made.strategies]


def test_a_safety_stop_that_fires_is_reported_and_the_answer_stays_valid(space_7b, lengths):
    """A microsecond passes before the first program: no program runs, no search judges
    anything new, and the proposal says so."""
    stopped = propose(space_7b, lengths, replace(CONFIG, time_limit_s=1e-6))
    validate_proposal(stopped, space_7b)
    assert stopped.solver.status == "time_limit" and "0 programs" in stopped.solver.message


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
    ({"strategies": 0}, "strategies: 0 must be between 1 and 64"),
    ({"devices": 12}, "devices: 12 must fill whole nodes: a multiple of devices_per_node = 8"),
    ({"token_budget": 1000}, "token_budget: 1000 is smaller than one sequence of max_seq_len = 32768 tokens"),
    ({"tolerance": 0.0}, "tolerance: 0.0 must be > 0"),
    ({"search_steps": 0}, "search_steps: 0 must be >= 1"),
    ({"search_evaluations": -1}, "search_evaluations: -1 must be between 0 and 100000"),
    ({"solver_nodes": 0}, "solver_nodes: 0 must be between 1 and 10000000"),
])
def test_bad_configurations(change, message):
    with pytest.raises(HydraulisError, match=message.replace("(", r"\(").replace(")", r"\)")):
        replace(CONFIG, **change)


def test_bad_lengths(space_7b):
    with pytest.raises(HydraulisError, match=r"lengths\[1\]: -5 must be a positive length"):
        propose(space_7b, [100, -5], CONFIG)
