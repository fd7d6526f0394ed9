"""Stage 2 on a class of many identical many-stage pipelines: the most loaded ones search every
candidate, the others the winning target row and first-fit decreasing."""

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.types import PipelineGroup, PipelineModel, Scheme, Strategy, TimeCoefficients
from hydraulis.dispatch import balanced_packing
from hydraulis.dispatch.balanced_packing import REPRESENTED, balanced_packings
from hydraulis.dispatch.packing import first_fit_decreasing
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans
from tests.base.test_first_fit import linear_first_fit

CAPACITY = 8000
TABLE = PipelineTable.of(Strategy((PipelineGroup(Scheme(1, 1, 4), REPRESENTED + 4, CAPACITY,
                                                 TimeCoefficients(1e-6, 0.02, 3.0)),)), PipelineModel())


@given(st.lists(st.integers(1, CAPACITY), min_size=REPRESENTED + 4, max_size=200), st.integers(0, 3))
@settings(max_examples=40, deadline=None)
def test_a_class_places_every_piece_once_and_its_most_loaded_pipeline_is_fully_searched(values, shift):
    tokens = np.sort(np.array(values, dtype=np.int64))[::-1]
    work = TABLE.work(tokens)
    owner = (np.arange(tokens.size) + shift) % TABLE.pipelines
    pieces_of = [np.flatnonzero(owner == p) for p in range(TABLE.pipelines)]
    packings = balanced_packings(TABLE, pieces_of, tokens, work, 0.75)
    for pieces, packing in zip(pieces_of, packings):
        placed = np.sort(np.concatenate(packing.micro_batches))
        assert placed.tolist() == pieces.tolist()
        assert all(tokens[mb].sum() <= CAPACITY for mb in packing.micro_batches)
        ffd = [float(TABLE.c[0] + work[0, pieces[b]].sum()) for b in first_fit_decreasing(tokens[pieces], CAPACITY)]
        assert packing.time_ms <= pipeline_makespans([np.array(ffd)], [4], TABLE.model)[0] + 1e-9
    lead = max(range(TABLE.pipelines), key=lambda p: (work[0, pieces_of[p]].sum(), -p))
    first_fit = balanced_packing._first_fit_packings(TABLE, [pieces_of[lead]], [lead], tokens, work)
    full = balanced_packing._Candidates(TABLE, [pieces_of[lead]], first_fit, [lead], tokens, work, 0.75).best()[0]
    floor = max(balanced_packing._lower_bounds(TABLE, pieces_of, tokens, work))
    if first_fit[0].time_ms > floor:
        assert packings[lead].time_ms == (first_fit[0] if full is None else full).time_ms


@given(st.lists(st.integers(1, CAPACITY), min_size=REPRESENTED + 4, max_size=200), st.integers(0, 3),
       st.integers(1, 3))
@settings(max_examples=40, deadline=None)
def test_skipping_pipelines_under_the_floor_keeps_the_step_time_and_every_bound_holds(values, shift, crowd):
    tokens = np.sort(np.array(values, dtype=np.int64))[::-1]
    work = TABLE.work(tokens)
    owner = np.minimum((np.arange(tokens.size) + shift) % (TABLE.pipelines + crowd), TABLE.pipelines - 1)
    pieces_of = [np.flatnonzero(owner == p) for p in range(TABLE.pipelines)]
    staged = [p for p in range(TABLE.pipelines) if pieces_of[p].size]
    first_fit = balanced_packing._first_fit_packings(TABLE, [pieces_of[p] for p in staged], staged, tokens, work)
    with patch.object(balanced_packing, "REPRESENTED", TABLE.pipelines + 1):  # every pipeline searches every row
        packings = balanced_packings(TABLE, pieces_of, tokens, work, 0.75)
        searched = balanced_packing._staged_packings(TABLE, pieces_of, dict(zip(staged, first_fit)), staged, tokens,
                                                     work, 0.75)
    unskipped = [(ff if found is None else found).time_ms for ff, found in zip(first_fit, searched)]
    assert max(p.time_ms for p in packings) == max(unskipped)
    for bound, time_ms in zip(balanced_packing._lower_bounds(TABLE, pieces_of, tokens, work), unskipped):
        assert bound <= time_ms + 1e-9


@given(st.lists(st.integers(1, 6000), min_size=1, max_size=300), st.integers(1, 5000))
@settings(max_examples=200, deadline=None)
def test_first_fit_over_the_tree_of_rooms_is_the_linear_scan(values, capacity):
    tokens = np.sort(np.array(values, dtype=np.int64))[::-1]
    assert first_fit_decreasing(tokens, capacity) == linear_first_fit(tokens.tolist(), capacity)
