"""Staged pipelines: the per-stage 1F1B simulation, stage times and memory on each stage's device."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import HydraulisError
from hydraulis.base.stages import parse_stages
from hydraulis.base.types import OptimizerLayout, PipelineModel, Scheme
from hydraulis.cost import pipeline_times_1f1b, simulate_1f1b_stages
from hydraulis.cost.memory import memory_breakdown
from hydraulis.cost.staged import staged_cost, staged_profile, staged_time_coefficients, uniform_staged
from tests.conftest import mixed_cluster_spaces

rows = st.lists(st.floats(min_value=0.0, max_value=1e3, allow_nan=False), min_size=1, max_size=12)


@settings(max_examples=150)
@given(times=rows, pp=st.integers(1, 6), phi=st.floats(0.05, 0.95), d=st.floats(0.0, 5.0))
def test_equal_stages_give_the_uniform_schedule(times, pp, phi, d):
    model = PipelineModel(phi, d)
    staged = simulate_1f1b_stages([times] * pp, model).makespan_ms
    assert staged == pytest.approx(float(pipeline_times_1f1b(np.array([times]), pp, model)[0]), rel=1e-9, abs=1e-9)


@settings(max_examples=150)
@given(data=st.data(), pp=st.integers(1, 5), v=st.integers(1, 8), phi=st.floats(0.05, 0.95))
def test_bottleneck_schedule_bounds_the_staged_one(data, pp, v, phi):
    times = [data.draw(st.lists(st.floats(0.0, 1e3), min_size=v, max_size=v)) for _ in range(pp)]
    bottleneck = [max(row[j] for row in times) for j in range(v)]
    model = PipelineModel(phi)
    staged = simulate_1f1b_stages(times, model).makespan_ms
    assert staged <= simulate_1f1b_stages([bottleneck] * pp, model).makespan_ms + 1e-6
    assert staged >= max(sum(row) for row in times) - 1e-6


def scheme(text: str) -> Scheme:
    return Scheme.staged(*parse_stages(text))


@pytest.mark.parametrize("plain, group", [(Scheme(1, 8, 2), "h100"), (Scheme(2, 4, 2), "a100"), (Scheme(1, 4, 1), "a100")])
def test_a_plain_scheme_on_one_group_is_its_composed_profile(plain, group):
    spaces = mixed_cluster_spaces()
    space = spaces.space(group)
    cost = staged_cost(spaces, uniform_staged(plain, group, spaces.model.layers))
    assert cost.bottleneck == space.profile(plain).time
    layout = OptimizerLayout(spaces.cluster.devices, 1, 1)
    whole = memory_breakdown(space.memory, space.model, space.profile(plain), layout).max_seq_len
    assert whole <= cost.max_seq_len <= whole * 1.05


def test_faster_devices_take_more_layers():
    spaces = mixed_cluster_spaces()
    uneven = staged_cost(spaces, scheme("1|8:16@a100>8:24@h100"))
    even = staged_cost(spaces, scheme("1|8:20@a100>8:20@h100"))
    assert uneven.bottleneck.b < even.bottleneck.b
    assert uneven.pipeline_ms([[8192]] * 8) < even.pipeline_ms([[8192]] * 8)
    assert [m.group for m in uneven.memory] == ["a100", "h100"]
    assert staged_time_coefficients(spaces, uneven.scheme) == uneven.bottleneck


def test_cross_group_hand_off_costs_the_link():
    spaces = mixed_cluster_spaces()
    across = staged_cost(spaces, scheme("1|4:20@h100>4:20@a100")).stage_times[0]
    inside = staged_cost(spaces, scheme("1|4:20@h100>4:20@h100")).stage_times[0]
    assert across.b - inside.b == pytest.approx(4 * 5120 / (4 * 25.0 * 1e6))


@pytest.mark.parametrize("text, field", [("1|8:20@a100>8:20@v100", "group"), ("4|8:20@a100>8:20@h100", "scheme"),
                                         ("1|8:20@a100>8:21@h100", "scheme.stages")])
def test_bad_staged_schemes_name_the_field(text, field):
    with pytest.raises(HydraulisError) as error:
        staged_cost(mixed_cluster_spaces(), scheme(text))
    assert error.value.field == field


def test_a_space_without_segments_prices_stages_from_its_plain_profiles():
    spaces = mixed_cluster_spaces()
    bare = ClusterSpaces(spaces.cluster, tuple(replace(s, segments=()) for s in spaces.spaces))
    whole = staged_cost(bare, uniform_staged(Scheme(1, 8, 1), "h100", 40))
    profile = spaces.space("h100").profile(Scheme(1, 8, 1))
    assert whole.bottleneck.b == pytest.approx(profile.time.b) and whole.bottleneck.c == pytest.approx(profile.time.c)
    assert whole.memory[0].activation_bytes_per_token == pytest.approx(profile.activation_bytes_per_token)
    halves = staged_cost(bare, scheme("1|8:20@a100>8:20@h100"))
    assert halves.stage_times[1].b == pytest.approx(profile.time.b / 2 + 4 * 5120 / (8 * 25.0 * 1e6))


def test_the_profile_and_the_cluster_cost_are_one_composition():
    spaces = mixed_cluster_spaces()
    h100 = spaces.space("h100")
    inside = scheme("1|4:20@h100>2:20@h100")
    profile = staged_profile(inside, lambda cp, tp: h100.segments_of(cp, tp, False), h100.cluster.devices_per_node, 0)
    assert profile.time == staged_cost(spaces, inside).bottleneck
    assert profile.activation_bytes_per_token == max(m.activation_bytes_per_token for m in staged_cost(spaces, inside).memory)
    across = scheme("1|4:20@h100>2:20@a100")
    link = 4 * 5120 / (2 * 25.0 * 1e6)
    linked = staged_profile(across, lambda cp, tp: h100.segments_of(cp, tp, False), h100.cluster.devices_per_node, 0,
                            hand_off_b=lambda stage, other: link)
    assert linked.time.b == pytest.approx(profile.time.b + link)
