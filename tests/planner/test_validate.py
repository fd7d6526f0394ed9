"""Broken proposals: each violation is found and named by its field."""

from dataclasses import replace

import pytest

from hydraulis.artifacts import proposal_to_dict, read_proposal, write_json
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import (
    OptimizerLayout,
    PipelineGroup,
    PipelineModel,
    Proposal,
    ProposedStrategy,
    Scheme,
    SolverReport,
    Strategy,
)
from hydraulis.planner import proposal_violations, validate_proposal
from hydraulis.planner.validate import node_placement


def group(space, cp, tp, pp, count, max_seq_len):
    scheme = Scheme(cp, tp, pp)
    return PipelineGroup(scheme, count, max_seq_len, space.profile(scheme).time)


def proposal(space, *strategies, max_seq_len=32768, devices=32, layout=OptimizerLayout(32, 1, 1), per_node=8):
    return Proposal(model=space.model, devices=devices, devices_per_node=per_node, optimizer_layout=layout,
                    strategies=tuple(strategies), token_budget=131072, max_seq_len=max_seq_len,
                    pipeline_model=PipelineModel(), solver=SolverReport("optimal", "cbc", 1.0))


def proposed(strategy_groups, serves_from, serves_to):
    strategy = Strategy(tuple(strategy_groups))
    return ProposedStrategy(strategy, serves_from, serves_to, 1000.0, 100.0, (0,) * len(strategy.pipelines))


@pytest.fixture
def valid(space_7b):
    return proposal(space_7b,
                    proposed([group(space_7b, 1, 4, 1, 8, 40000)], 0, 12000),
                    proposed([group(space_7b, 1, 16, 1, 1, 100000), group(space_7b, 1, 4, 1, 4, 40000)], 12000, 32768))


def fields(found):
    return [v.field for v in found]


def test_a_valid_proposal_has_no_violation(valid, space_7b):
    assert proposal_violations(valid, space_7b) == ()
    assert validate_proposal(valid, space_7b) is valid


def test_too_many_devices(valid, space_7b):
    broken = replace(valid, strategies=(proposed([group(space_7b, 1, 4, 1, 9, 40000)], 0, 32768),))
    assert "strategies[0].devices" in fields(proposal_violations(broken))


def test_node_packing(space_7b):
    straddling = proposed([group(space_7b, 1, 4, 1, 3, 40000)], 0, 32768)
    broken = proposal(space_7b, straddling, devices=12, layout=OptimizerLayout(12, 1, 1), per_node=6)
    found = proposal_violations(broken)
    assert fields(found) == ["strategies[0].pipelines"]
    assert "cannot be placed on the nodes: a pipeline of 4 devices finds no node" in str(found[0])
    twice = Strategy((group(space_7b, 1, 16, 1, 2, 100000),))
    assert node_placement(twice, 16, 8) == "pipelines of 8 or more devices need more whole nodes than the 2 there are"
    assert node_placement(Strategy((group(space_7b, 1, 16, 1, 1, 100000),)), 16, 8) == ""


def test_memory_needs_the_space(valid, space_7b):
    too_long = proposed([group(space_7b, 1, 4, 1, 8, 60000)], 0, 32768)
    broken = replace(valid, strategies=(too_long,))
    assert proposal_violations(broken) == ()
    found = proposal_violations(broken, space_7b)
    assert fields(found) == ["strategies[0].pipelines[0].max_seq_len"]
    assert "does not fit memory: scheme (1,4,1) holds" in found[0].problem


def test_coverage_gap_and_maximum(valid, space_7b):
    gap = replace(valid, strategies=(valid.strategies[0], replace(valid.strategies[1], serves_from=16000)))
    found = proposal_violations(gap)
    assert [(v.field, v.value) for v in found] == [("strategies", "(12000, 16000]")]
    short = replace(valid, strategies=(proposed([group(space_7b, 1, 4, 1, 8, 40000)], 0, 32768),), max_seq_len=65536)
    assert fields(proposal_violations(short)) == ["strategies", "max_seq_len"]


def test_a_strategy_must_hold_the_steps_it_serves(valid, space_7b):
    broken = replace(valid, strategies=(proposed([group(space_7b, 1, 4, 1, 8, 40000)], 0, 32768),))
    assert proposal_violations(broken) == ()
    broken = replace(valid, strategies=(proposed([group(space_7b, 1, 4, 1, 8, 30000)], 0, 32768),))
    assert fields(proposal_violations(broken)) == ["strategies[0].serves_to", "max_seq_len"]


def test_layout_scheme_and_space_mismatches(valid, space_7b, space_13b):
    assert fields(proposal_violations(replace(valid, optimizer_layout=OptimizerLayout(5, 1, 1)))) == ["optimizer_layout"]
    odd = PipelineGroup(Scheme(1, 3, 1), 2, 1000, valid.strategies[0].strategy.pipelines[0].time)
    found = proposal_violations(replace(valid, strategies=(proposed([odd], 0, 1000),) + valid.strategies[1:]))
    assert "strategies[0].pipelines[0].scheme.tp" in fields(found)
    assert fields(proposal_violations(valid, space_13b)) == ["model"]
    retimed = replace(valid.strategies[0].strategy.pipelines[0], time=replace(valid.strategies[0].strategy.pipelines[0].time, a=1.0))
    found = proposal_violations(replace(valid, strategies=(proposed([retimed], 0, 12000),) + valid.strategies[1:]), space_7b)
    assert fields(found) == ["strategies[0].pipelines[0].time"]
    foreign = PipelineGroup(Scheme(2, 4, 1), 1, 40000, retimed.time)
    found = proposal_violations(replace(valid, strategies=(proposed([foreign], 0, 12000),) + valid.strategies[1:]), space_7b)
    assert fields(found) == ["strategies[0].pipelines[0].scheme"]


def test_validate_names_the_first_violation_and_counts_the_rest(valid, space_7b):
    broken = replace(valid, strategies=(proposed([group(space_7b, 1, 4, 1, 9, 30000)], 0, 32768),))
    with pytest.raises(HydraulisError, match=r"^strategies\[0\]\.devices: 36 exceeds the proposal's 32 devices "
                                             r"\(and 3 more violations\)$"):
        validate_proposal(broken)


def test_every_loaded_proposal_is_validated(valid, space_7b, tmp_path):
    broken = replace(valid, strategies=(valid.strategies[0],))
    write_json(tmp_path / "p.json", proposal_to_dict(broken))
    with pytest.raises(HydraulisError, match=r"strategies: '\(12000, 32768\]' is a range of longest-sequence lengths"):
        read_proposal(tmp_path / "p.json")
    write_json(tmp_path / "q.json", proposal_to_dict(valid))
    assert read_proposal(tmp_path / "q.json", space_7b) == valid
    write_json(tmp_path / "r.json", proposal_to_dict(replace(valid, model=replace(valid.model, name="mine"))))
    with pytest.raises(HydraulisError, match="^model: 'mine' differs from the scheme space's model llama-7b"):
        read_proposal(tmp_path / "r.json", space_7b)
