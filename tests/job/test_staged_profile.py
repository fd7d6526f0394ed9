"""Profiles of staged schemes: stages of equal tp and the even split are the plain scheme; a
space without the segments of a stage's tp cannot describe it."""

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.stages import Stage
from hydraulis.base.types import Cluster, Recompute, Scheme
from hydraulis.job.staged_profile import analytic_profile_of, space_profile_of
from hydraulis.profiler.analytic import analytic_profile, analytic_scheme_space

TINY, CPU = model_preset("tiny"), device_preset("cpu")
CLUSTER = Cluster(8, 8, "cpu")


@pytest.mark.parametrize("cp, tp, split, recompute", [(1, 2, (2, 2), Recompute.NONE), (2, 1, (2, 1, 1), Recompute.FULL),
                                                      (1, 4, (1, 1, 1, 1), Recompute.SELECTIVE)])
def test_equal_stages_are_the_plain_scheme(cp, tp, split, recompute):
    staged = Scheme.staged(cp, tuple(Stage(tp, layers) for layers in split), recompute)
    plain = analytic_profile(TINY, CPU, CLUSTER, Scheme(cp, tp, len(split), recompute=recompute))
    profile = analytic_profile_of(TINY, CPU, CLUSTER, staged)
    assert profile.scheme == staged
    assert profile.time == pytest.approx(plain.time)
    assert profile.activation_bytes_per_token == pytest.approx(plain.activation_bytes_per_token)


def test_a_wider_stage_is_faster_and_the_slowest_stage_sets_the_time():
    wide, narrow = (analytic_profile_of(TINY, CPU, CLUSTER, Scheme.staged(1, stages)).time.b
                    for stages in ((Stage(4, 2), Stage(4, 2)), (Stage(4, 2), Stage(1, 2))))
    assert narrow > wide


def test_a_space_needs_the_segments_of_every_stage_tp(space_7b):
    with pytest.raises(HydraulisError, match="segments of cp 1, tp 2"):
        space_profile_of(space_7b, Scheme.staged(1, (Stage(2, 16), Stage(1, 16))))
    space = analytic_scheme_space(TINY, CPU, CLUSTER, [1], [1, 2], [1, 2], "", "", segments=True)
    staged = Scheme.staged(1, (Stage(2, 2), Stage(2, 2)))
    assert space_profile_of(space, staged).time == pytest.approx(space.profile(Scheme(1, 2, 2)).time)
