"""Per-rank assignments of a step plan (design §8.3): the runtime's rank map, every rank of a
pipeline on its micro-batches, every sequence in exactly one pipeline; bad layouts named by path."""

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod, MicroBatch, PipelinePlan, Scheme, StepPlan
from hydraulis.dispatch import DispatchOptions, OversizePolicy, dispatch
from hydraulis.dispatch.assignments import RankAssignment, StepAssignments, step_assignments
from hydraulis.runtime.rank_map import RankMap, RankPlace
from hydraulis.sharding.pipeline import PipelineSplit
from tests.dispatch.helpers import group, proposal


def hand_plan(*pipelines: tuple[Scheme, tuple[tuple[int, ...], ...]], lengths=(9, 3, 4)) -> StepPlan:
    plans = tuple(PipelinePlan(scheme, 100, tuple(MicroBatch(mb, tuple(lengths[i] for i in mb)) for mb in mbs), 1.0)
                  for scheme, mbs in pipelines)
    return StepPlan(0, BatchingMethod.DISPATCH_BALANCED_PACKING, 1.0, 1.0, 0.0, plans)


def test_the_worked_example():
    plan = hand_plan((Scheme(1, 2, 1), ((0,),)), (Scheme(1, 1, 2), ((2, 1),)))
    found = step_assignments(plan, (9, 3, 4), devices=4)
    assert [(r.rank, r.pipeline, r.stage, r.cp_rank, r.tp_rank, r.micro_batches) for r in found.ranks] == [
        (0, 0, 0, 0, 0, ((0,),)), (1, 0, 0, 0, 1, ((0,),)), (2, 1, 0, 0, 0, ((2, 1),)), (3, 1, 1, 0, 0, ((2, 1),))]
    assert found.lengths == (9, 3, 4)


def test_largest_pipeline_first_and_idle_ranks_listed_nowhere():
    plan = hand_plan((Scheme(1, 1, 1), ((1,),)), (Scheme(2, 2, 1), ((0, 2),)))
    found = step_assignments(plan, (9, 3, 4), devices=8)
    assert [r.rank for r in found.ranks] == [0, 1, 2, 3, 4]
    assert [(r.pipeline, r.cp_rank, r.tp_rank) for r in found.ranks] == [(1, 0, 0), (1, 0, 1), (1, 1, 0), (1, 1, 1),
                                                                           (0, 0, 0)]


def test_truncated_sequences_keep_their_index_with_the_planned_length():
    plan = hand_plan((Scheme(1, 1, 1), ((0, 1),)), lengths=(5, 3))
    assert step_assignments(plan, (8, 3), devices=1).lengths == (5, 3)


def test_pieces_of_a_split_sequence_are_refused():
    plan = hand_plan((Scheme(1, 1, 1), ((0,), (0, 1))), lengths=(5, 3))
    with pytest.raises(HydraulisError, match="oversize: 'split'"):
        step_assignments(plan, (10, 3), devices=1)


groups = st.builds(group, pp=st.integers(1, 3), count=st.integers(1, 3), capacity=st.integers(512, 4096),
                   a=st.floats(0.0, 1e-5), b=st.floats(1e-3, 0.1), c=st.floats(0.0, 5.0), tp=st.sampled_from([1, 2, 4]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chosen=st.lists(groups, min_size=1, max_size=3), cp=st.sampled_from([1, 2]),
       lengths=st.lists(st.integers(1, 4000), min_size=1, max_size=40), spare=st.integers(0, 3))
def test_every_plan_agrees_with_the_runtimes_rank_map(chosen, cp, lengths, spare):
    chosen = [replace(g, scheme=replace(g.scheme, cp=cp)) for g in chosen]
    prop = proposal(tuple(chosen))
    plan = dispatch(prop, lengths, BatchingMethod.DISPATCH_BALANCED_PACKING,
                    DispatchOptions(oversize=OversizePolicy.TRUNCATE))
    found = step_assignments(plan, lengths, prop.devices + spare)
    layouts = tuple(PipelineSplit(p.scheme, p.scheme.stage_layers(32)) for p in plan.pipelines)
    rank_map = RankMap(layouts, prop.devices + spare)
    for r in found.ranks:
        assert rank_map.place(r.rank) == RankPlace(r.pipeline, r.stage, r.cp_rank, r.tp_rank)
        assert r.micro_batches == tuple(mb.sequences for mb in plan.pipelines[r.pipeline].micro_batches)
    assert len(found.ranks) == prop.devices
    heads = {r.pipeline: r.micro_batches for r in found.ranks}
    assert sorted(s for mbs in heads.values() for mb in mbs for s in mb) == list(range(len(lengths)))


def _valid() -> StepAssignments:
    return step_assignments(hand_plan((Scheme(1, 2, 1), ((0,),)), (Scheme(1, 1, 2), ((2, 1),))), (9, 3, 4), 4)


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: replace(a, ranks=a.ranks[:3]), "ranks: 3 must list the 4 placed ranks"),
    (lambda a: replace(a, ranks=(a.ranks[1], a.ranks[0], *a.ranks[2:])), r"ranks\[1\].rank: 0 must exceed"),
    (lambda a: replace(a, ranks=(a.ranks[0], replace(a.ranks[1], tp_rank=0), *a.ranks[2:])),
     r"ranks\[1\].rank: 1 must be 0, where the rank map places"),
    (lambda a: replace(a, ranks=(*a.ranks[:3], replace(a.ranks[3], micro_batches=((2, 7),)))),
     r"ranks\[3\].micro_batches\[0\]\[1\]: 7 must be <= 2"),
    (lambda a: replace(a, ranks=(*a.ranks[:3], replace(a.ranks[3], micro_batches=((2,), (1,))))),
     r"ranks\[3\].micro_batches: .* must be pipeline 1's"),
    (lambda a: replace(a, ranks=(*a.ranks[:2], *(replace(r, micro_batches=((2, 0),)) for r in a.ranks[2:]))),
     "sequence: 0 runs twice"),
    (lambda a: replace(a, ranks=(*a.ranks[:2], *(replace(r, micro_batches=((2,),)) for r in a.ranks[2:]))),
     r"lengths: \[1\] are sequences no pipeline runs"),
    (lambda a: replace(a, ranks=(*a.ranks[:3], replace(a.ranks[3], stage=2))), r"ranks\[3\].stage: 2 must be below pp"),
    (lambda a: replace(a, devices=3), "schemes: '4 devices' need more than the 3"),
])
def test_a_bad_layout_is_named_by_its_path(change, message):
    with pytest.raises(HydraulisError, match=message):
        change(_valid())


def test_a_rank_field_must_be_a_natural_number():
    with pytest.raises(HydraulisError, match="cp_rank: -1 must be >= 0"):
        RankAssignment(0, 0, 0, -1, 0, ((0,),))
