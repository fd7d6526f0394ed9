"""The sweep: token counts, mixes, depths of the representative block, schemes left out, which
points share the measuring rounds."""

import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import Recompute, Scheme, SchemeOptions
from hydraulis.profiler.sweep import (
    MIN_PIECE,
    Interleave,
    PointRole,
    Statistic,
    SweepConfig,
    block_depths,
    length_mixes,
    parse_token_counts,
    sweep_plan,
)
from hydraulis.runtime.profiling.device import default_interleave
from hydraulis.sharding.kinds import DeviceKind

TINY = model_preset("tiny")


@pytest.mark.parametrize("text, expected", [
    ("64,128,512", (64, 128, 512)),
    ("512, 64,64", (64, 512)),
    ("64:512", (64, 128, 256, 512)),
    ("64:600", (64, 128, 256, 512)),
    ("128:512:128", (128, 256, 384, 512)),
])
def test_token_counts_as_lists_and_ranges(text, expected):
    assert parse_token_counts(text) == expected


@pytest.mark.parametrize("text", ["", ",", "abc", "512:64", "4,64", "64:128:0"])
def test_bad_token_counts_name_the_field(text):
    with pytest.raises(HydraulisError, match="seq_lens"):
        parse_token_counts(text)


@pytest.mark.parametrize("tokens", [8, 31, 64, 100, 1000])
def test_mixes_hold_exactly_the_tokens_and_no_piece_is_too_short(tokens):
    mixes = length_mixes(tokens)
    assert mixes and all(sum(m) == tokens and min(m) >= MIN_PIECE for m in mixes)
    assert len({sum(s * s for s in m) for m in mixes}) == len(mixes)


def test_block_depths():
    assert block_depths(4, 1) == (1, 2)
    assert block_depths(2, 1) == (2,)
    assert block_depths(32, 2) == (2, 4)
    assert block_depths(4, 2) == (4,)


def test_plan_of_the_sweep_docstring_example():
    plan = sweep_plan(SweepConfig(TINY, (1,), (1,), (1, 2), (64, 128), max_procs=4, check_full_stage=True))
    by_scheme = {s: [p for p in plan.points if p.scheme == s] for s in plan.schemes}
    whole = by_scheme[Scheme(1, 1, 1)]
    assert sorted({p.depth for p in whole}) == [1, 2, 4]
    assert [p.lengths for p in whole if p.depth == 4] == [(64,), (64, 64)]
    assert {p.role for p in whole if p.depth == 4} == {PointRole.CHECK}
    assert len([p for p in whole if p.depth == 1]) == 8
    assert {p.depth for p in by_scheme[Scheme(1, 1, 2)]} == {2}


def test_schemes_beyond_the_local_devices_are_listed_with_the_reason():
    plan = sweep_plan(SweepConfig(TINY, (1, 2), (1, 2, 4), (1, 2), (64, 128), max_procs=4))
    assert len(plan.schemes) == 8
    assert {str(s.scheme) for s in plan.skipped} == {"(1,4,2)", "(2,2,2)", "(2,4,1)", "(2,4,2)"}
    assert all("only 4 here" in s.reason for s in plan.skipped)


def test_no_scheme_fits_is_an_error():
    with pytest.raises(HydraulisError, match="local devices"):
        sweep_plan(SweepConfig(TINY, (2,), (2,), (1,), (64, 128), max_procs=2))


def test_a_degree_that_cannot_shard_the_model_is_an_error():
    with pytest.raises(HydraulisError, match="does not divide model.heads"):
        SweepConfig(TINY, (1,), (3,), (1,), (64, 128), max_procs=4)


def test_every_variant_is_a_scheme_of_its_own_and_sp_needs_tp():
    variants = (SchemeOptions(), SchemeOptions(sp=True), SchemeOptions(recompute=Recompute.FULL))
    plan = sweep_plan(SweepConfig(TINY, (1,), (1, 2), (1,), (64, 128), max_procs=4, variants=variants))
    assert set(plan.schemes) == {Scheme(1, 1, 1), Scheme(1, 1, 1, recompute=Recompute.FULL), Scheme(1, 2, 1),
                                 Scheme(1, 2, 1, sp=True), Scheme(1, 2, 1, recompute=Recompute.FULL)}
    assert len({p.scheme for p in plan.points}) == 5


@pytest.mark.parametrize("statistic, samples, picked", [
    (Statistic.MIN, [3.0, 1.0, 2.0, 1.0], 1),
    (Statistic.MEDIAN, [5.0, 1.0, 3.0], 2),
    (Statistic.MEDIAN, [4.0, 1.0, 3.0, 2.0], 3),
    (Statistic.MEDIAN, [7.0], 0),
])
def test_a_statistic_picks_one_of_the_samples(statistic, samples, picked):
    assert statistic.index(np.array(samples)) == picked


def test_interleave_must_be_one_of_its_values():
    with pytest.raises(HydraulisError, match=r"interleave: 'sweep' must be one of \['scheme', 'sweep'\]"):
        SweepConfig(TINY, (1,), (1,), (1,), (64, 128), max_procs=2, interleave="sweep")


def test_cpu_profiles_interleave_the_sweep_and_cuda_profiles_each_scheme():
    assert default_interleave(DeviceKind.CPU) is Interleave.SWEEP
    assert default_interleave(DeviceKind.CUDA) is Interleave.SCHEME
