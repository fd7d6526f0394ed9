"""Per-step strategy synthesis: never a slower step than the best proposal strategy (property
test), valid and deterministic plans within the budget, the switch priced by new
communicators, and a worked example."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.placement import placement_problem
from hydraulis.base.types import BatchingMethod
from hydraulis.dispatch import DispatchOptions, OversizePolicy, dispatch
from hydraulis.dispatch.menu import menu
from hydraulis.dispatch.synthesis import (
    Synthesise,
    SynthesisOptions,
    plan_step,
    strategy_communicators,
    synthesise_step,
)
from tests.dispatch.helpers import BATCH, CHEAP, FAST, check_plan, consistent_proposal, group, kind, proposal

kinds = st.builds(kind, tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2]), capacity=st.integers(500, 6000),
                  a=st.floats(0.0, 1e-4), b=st.floats(1e-3, 0.1), c=st.floats(0.0, 20.0))


@st.composite
def proposals(draw):
    devices = draw(st.sampled_from([8, 16]))
    menu_kinds = draw(st.lists(kinds, min_size=1, max_size=3, unique_by=lambda g: g.scheme))
    strategies = []
    for _ in range(draw(st.integers(1, 3))):
        left, groups = devices, []
        for g in draw(st.permutations(menu_kinds)):
            most = left // g.scheme.devices
            if most:
                n = draw(st.integers(0 if groups else 1, most))
                if n:
                    groups.append((g, n))
                    left -= n * g.scheme.devices
        strategies.append(groups or [(menu_kinds[0], 1)])
    return consistent_proposal([s for s in strategies if s], devices, draw(st.sampled_from([0.0, 50.0])),
                               draw(st.sampled_from([0.0, 5.0, 1e4])), draw(st.sampled_from([0.0, 0.5])))


batches = st.lists(st.integers(1, 6000), min_size=1, max_size=30)
settings_ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(prop=proposals(), batch=batches, before=batches, evaluations=st.integers(0, 12), seed=st.integers(0, 20),
       method=st.sampled_from([BatchingMethod.DISPATCH_BALANCED_PACKING, BatchingMethod.FIXED_PACKING]))
def test_synthesis_never_predicts_a_slower_step_than_the_best_proposal_strategy(prop, batch, before, evaluations,
                                                                                 seed, method):
    """Also with the memory a step ``before`` passed on."""
    options = DispatchOptions(seed=seed, oversize=OversizePolicy.SPLIT)
    synthesis = SynthesisOptions(Synthesise.PROPOSAL, evaluations=evaluations)
    memory = synthesise_step(prop, before, method, options, synthesis)[1]
    plan = plan_step(prop, batch, method, options, synthesis, memory=memory)
    best = dispatch(prop, batch, method, options)
    assert plan.predicted_ms <= best.predicted_ms
    limit = max(p.strategy.max_seq_len for p in prop.strategies)
    check_plan(prop, plan, batch, 1, OversizePolicy.SPLIT, limit)
    made = plan.synthesis
    event("synthesised" if made else "proposal strategy kept")
    if made is None:
        assert replace(plan, planning_ms=0.0, notes=()) == replace(best, planning_ms=0.0, notes=(),
                                                                   lower_bound_ms=plan.lower_bound_ms)
    else:
        assert plan.strategy_index == -1 and plan.predicted_ms < best.predicted_ms
        assert made.proposal_ms == best.predicted_ms and made.evaluations <= evaluations
        assert not placement_problem([g.scheme.devices for g in made.strategy.expanded()], prop.devices, 8)
        kinds_of_menu = {(g.scheme, g.max_seq_len, g.time) for g in menu(prop)}
        assert {(g.scheme, g.max_seq_len, g.time) for g in made.strategy.pipelines} <= kinds_of_menu
        known = frozenset().union(*(strategy_communicators(p.strategy) for p in prop.strategies))
        assert made.new_communicators == len(strategy_communicators(made.strategy) - known)
        assert made.switch_ms == pytest.approx(made.new_communicators * prop.communicator_ms)
    again = plan_step(prop, batch, method, options, synthesis, memory=memory)
    assert replace(again, planning_ms=0.0) == replace(plan, planning_ms=0.0), "same inputs, same plan"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prop=proposals(), batch=batches, extra=st.lists(kinds, min_size=1, max_size=3))
def test_space_synthesis_is_never_slower_and_uses_the_space(prop, batch, extra):
    options = DispatchOptions(oversize=OversizePolicy.SPLIT)
    plan = plan_step(prop, batch, options=options, synthesis=SynthesisOptions(Synthesise.SPACE, tuple(extra), 8))
    assert plan.predicted_ms <= dispatch(prop, batch, options=options).predicted_ms
    if plan.synthesis:
        allowed = {(g.scheme, g.max_seq_len, g.time) for g in menu(prop, extra)}
        assert {(g.scheme, g.max_seq_len, g.time) for g in plan.synthesis.strategy.pipelines} <= allowed


def test_worked_example_one_fast_pipeline_for_the_long_sequence_and_cheap_ones_for_the_rest():
    """2×(1,4,1) can hold the 20K sequence, 8×(1,1,1) cannot; the step runs faster on one fast
    pipeline beside cheap ones, which the proposal does not have."""
    prop = consistent_proposal([[(FAST, 2)], [(CHEAP, 8)]], 8)
    plan = plan_step(prop, BATCH)
    assert plan.synthesis is not None and plan.strategy_index == -1
    assert str(plan.synthesis.strategy) == "1×(1,4,1) + 4×(1,1,1)"
    assert plan.synthesis.proposal_ms == pytest.approx(dispatch(prop, BATCH).predicted_ms)
    assert plan.predicted_ms < plan.synthesis.proposal_ms
    assert plan.synthesis.new_communicators == 0 and plan.synthesis.switch_ms == 0.0
    assert "synthesis: 1×(1,4,1) + 4×(1,1,1)" in plan.notes[-1]


def test_the_winner_is_remembered_and_starts_the_next_step():
    """The worked example's strategy wins step 1 and is the memory's first entry, with its
    plan over its fluid estimate; step 2 (the same pieces) plans it first, as remembered."""
    prop = consistent_proposal([[(FAST, 2)], [(CHEAP, 8)]], 8)
    first, memory = synthesise_step(prop, BATCH)
    won = memory.entries[0]
    assert won.strategy == first.synthesis.strategy and first.synthesis.start != "remembered strategy"
    assert won.ratio > 0
    second, later = synthesise_step(prop, BATCH, memory=memory)
    assert second.synthesis.strategy == won.strategy and second.synthesis.start == "remembered strategy"
    assert later.entries[0].strategy == won.strategy and second.predicted_ms == first.predicted_ms


def test_new_communicators_are_priced_and_known_ones_are_free():
    """With nothing known the fast pipeline's tp group {0, 1, 2, 3} is new: a prohibitive
    creation time keeps the proposal's strategy — without spending a plan on a strategy whose
    switch alone exceeds the incumbent — and a small one is paid on the step."""
    dear = consistent_proposal([[(FAST, 2)], [(CHEAP, 8)]], 8, communicator_ms=1e6)
    kept = plan_step(dear, BATCH, known=frozenset())
    assert kept.synthesis is None and kept.notes[-1].startswith("synthesis: 0 of ")
    assert plan_step(dear, BATCH).synthesis is not None
    cheap = replace(dear, communicator_ms=2.0)
    made = plan_step(cheap, BATCH, known=frozenset()).synthesis
    assert (made.new_communicators, made.switch_ms) == (1, 2.0)


def test_off_is_the_dispatcher_and_space_needs_schemes():
    prop = consistent_proposal([[(FAST, 2)], [(CHEAP, 8)]], 8)
    off = plan_step(prop, BATCH, synthesis=SynthesisOptions(Synthesise.OFF))
    assert replace(off, planning_ms=0.0) == replace(dispatch(prop, BATCH), planning_ms=0.0)
    with pytest.raises(HydraulisError, match="synthesise: 'space' needs the scheme space's schemes"):
        SynthesisOptions(Synthesise.SPACE)
    with pytest.raises(HydraulisError, match="synthesis_evaluations"):
        SynthesisOptions(evaluations=-1)


def test_a_step_at_the_menus_lower_bound_is_not_searched():
    """Two pipelines, a piece only one of them holds and nothing else: the step is that piece's
    crossing, which is the bound; synthesis plans nothing and keeps the proposal's plan."""
    prop = proposal((group(2, 2, 4000, 1e-5, 0.05, 5.0),))
    plan = plan_step(prop, [3000], synthesis=SynthesisOptions(Synthesise.PROPOSAL, evaluations=8))
    assert plan.synthesis is None
    assert plan.predicted_ms == pytest.approx(plan.lower_bound_ms, rel=1e-9)
    assert any(note.startswith("synthesis: skipped") for note in plan.notes)
    off = plan_step(prop, [3000], synthesis=SynthesisOptions(Synthesise.OFF))
    assert plan.pipelines == off.pipelines
