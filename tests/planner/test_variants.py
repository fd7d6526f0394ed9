"""The variant choice: oracle against brute force over (sp, mode, k per stage), and the planner's use of it."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.segments import Block, Segments, compose_profile
from hydraulis.base.stages import even_split
from hydraulis.base.types import (
    Cluster,
    OptimizerLayout,
    PipelineGroup,
    ProposedStrategy,
    Recompute,
    Scheme,
    SchemeSpace,
    Strategy,
    TimeCoefficients,
)
from hydraulis.cost import memory_breakdown, scheme_capacities
from hydraulis.planner.config import Variants
from hydraulis.planner.distribution import step_statistics
from hydraulis.planner.layout import choose_optimizer_layout
from hydraulis.planner.variants import (
    Work,
    capacity,
    choose_variant,
    choose_variants,
    explain_variants,
    frugal_space,
    plain_space,
    variant_targets,
)
from hydraulis.profiler.analytic import analytic_scheme_space

CREATED = "2026-01-01T00:00:00+00:00"


def _space(model: str = "tiny", device: str = "cpu", devices: int = 8, pps=(1, 2, 3)) -> SchemeSpace:
    spec = device_preset(device)
    return analytic_scheme_space(replace(model_preset(model), layers=6) if model == "tiny" else model_preset(model),
                                 spec, Cluster(devices, devices, device), (1, 2), (1, 2), pps, CREATED, "test",
                                 segments=True)


def _brute_force(space: SchemeSpace, layout: OptimizerLayout, plain: Scheme, longest: int,
                 work: Work) -> float | None:
    """The fastest of every (sp, selective or k_0 … k_{pp−1}) that holds ``longest``."""
    free = memory_breakdown(space.memory, space.model, space.profile(plain), layout).free_for_activations
    split = even_split(space.model.layers, plain.pp)
    best = None
    for sp in (False, True) if plain.tp > 1 else (False,):
        schemes = [Scheme(plain.cp, plain.tp, plain.pp, sp, Recompute.SELECTIVE)]
        for counts in itertools.product(*(range(n + 1) for n in split)):
            schemes.append(Scheme(plain.cp, plain.tp, plain.pp, sp, Recompute.FULL, counts) if any(counts)
                           else Scheme(plain.cp, plain.tp, plain.pp, sp))
        for scheme in schemes:
            profile = space.profile(scheme)
            if free > 0 and capacity(free, profile) >= longest:
                best = min(best if best is not None else np.inf, work.ms(profile.time))
    return best


def _check_against_brute_force(space: SchemeSpace, layout: OptimizerLayout, longest: int, work: Work) -> None:
    for plain in space.profiles:
        choice = choose_variant(space, layout, plain, longest, work)
        best = _brute_force(space, layout, plain.scheme, longest, work)
        if best is None:
            assert choice is None, (plain.scheme, longest)
        else:
            assert choice is not None and choice.capacity >= longest, (plain.scheme, longest)
            assert choice.time_ms == pytest.approx(best, rel=1e-12), (plain.scheme, choice.scheme, longest)


@pytest.mark.parametrize("device", ["cpu", "h100-80g"])
@pytest.mark.parametrize("longest", [64, 512, 4096, 20000, 60000])
def test_choice_equals_brute_force_on_analytic_segments(longest, device):
    space = _space(device=device)
    for work in (Work.sequence(longest), Work(3.0 * longest**2, 10.0 * longest, 10.0)):
        _check_against_brute_force(space, OptimizerLayout(8, 1, 1), longest, work)


positive = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@st.composite
def random_segments(draw, cp: int, tp: int, sp: bool) -> Segments:
    def time() -> TimeCoefficients:
        return TimeCoefficients(draw(positive) * 1e-6, draw(positive), draw(positive))

    def kept(high: float = 1e4) -> float:
        return draw(st.floats(min_value=1.0, max_value=high, allow_nan=False))

    layer = Block(time(), kept(), kept())
    slower = [TimeCoefficients(layer.time.a + draw(positive) * 1e-6, layer.time.b + draw(positive),
                               layer.time.c + draw(positive)) for _ in range(2)]
    ends = {name: Block(time(), kept(), kept(), kept(), kept()) for name in ("first", "middle", "last", "only")}
    return Segments(cp, tp, sp, layer, Block(slower[0], kept(layer.kept_bytes_per_token), kept()),
                    Block(slower[1], kept(layer.kept_bytes_per_token), kept()), **ends)


@settings(max_examples=40)
@given(data=st.data(), longest=st.integers(min_value=1, max_value=200_000),
       squares=st.floats(min_value=0.0, max_value=1e12), tokens=st.floats(min_value=0.0, max_value=1e6),
       micro_batches=st.floats(min_value=0.0, max_value=100.0))
def test_choice_equals_brute_force_on_random_segments(data, longest, squares, tokens, micro_batches):
    base = _space(pps=(1, 2, 3))
    segments = tuple(data.draw(random_segments(*s.key)) for s in base.segments)
    profiles = tuple(compose_profile(next(s for s in segments if s.key == (p.scheme.cp, p.scheme.tp, False)),
                                     base.model, p.scheme, base.cluster.devices_per_node, p.overhead_bytes)
                     for p in base.profiles)
    space = replace(base, profiles=profiles, segments=segments)
    _check_against_brute_force(space, OptimizerLayout(8, 1, 1), longest, Work(squares, tokens, micro_batches))


def test_the_plain_scheme_is_chosen_while_it_holds_the_sequence_and_variants_beyond():
    space = _space("llama-7b", "a800-80g", 64, pps=(1, 2, 4, 8))
    layout = OptimizerLayout(64, 1, 1)
    plain = space.profile(Scheme(1, 2, 4))
    held = choose_variant(space, layout, plain, 4096, Work.sequence(4096))
    assert held.scheme == plain.scheme and held.time_ms == held.plain_time_ms
    longer = choose_variant(space, layout, plain, 32768, Work.sequence(32768))
    assert longer.capacity >= 32768 > longer.plain_capacity
    assert longer.scheme.recompute is Recompute.FULL and longer.time_ms > longer.plain_time_ms
    counts = [longer.scheme.full_layers(s, 8) for s in range(4)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert "to hold 32768 tokens" in longer.reason() and "layers per stage in full" in longer.reason()


def test_planner_space_gains_chosen_variants_and_none_keeps_the_plain_schemes():
    space = _space("llama-7b", "a800-80g", 64, pps=(1, 2, 4, 8))
    rng = np.random.default_rng(0)
    steps = [np.append(rng.integers(100, 4000, 40), longest) for longest in (2000, 9000, 20000, 32768)]
    targets = variant_targets(step_statistics(steps, 128, 32768), 4)
    assert [t for t, _ in targets] == sorted(int(s.max()) for s in steps)
    assert targets[1][1] == Work(float((steps[1] ** 2).sum()), float(steps[1].sum()), steps[1].sum() / 9000)
    extended, choices = choose_variants(space, OptimizerLayout(64, 1, 1), targets)
    assert len(extended.profiles) == len(space.profiles) + len(choices) and choices
    assert all(extended.profile(c.scheme) == c.profile for c in choices)
    none = plain_space(space, Variants.NONE)
    assert not none.has_variants and all(not p.scheme.options for p in none.profiles)
    assert choose_variants(none, OptimizerLayout(64, 1, 1), targets) == (none, ())
    choice = choices[0]
    group = PipelineGroup(choice.scheme, 1, choice.capacity, choice.profile.time)
    proposed = ProposedStrategy(Strategy((group,)), 0, 32768, 1.0, 0.0, (0,), "Serves all.")
    (explained,) = explain_variants([proposed], choices)
    assert explained.explanation.startswith("Serves all. ") and choice.reason() in explained.explanation


def test_a_layout_under_which_only_recomputation_holds_the_longest_sequence_is_chosen_with_variants():
    device = device_preset("a800-80g")
    space = analytic_scheme_space(model_preset("llama-32b"), device, Cluster(32, 8, device.name), (1, 2, 4, 8),
                                  (1, 2, 4, 8), (1, 2, 4, 8), created=CREATED, tool_version="test", segments=True)
    with pytest.raises(HydraulisError, match="exceeds the longest sequence any scheme can hold"):
        choose_optimizer_layout(plain_space(space, Variants.NONE), 32_768)
    layout, _ = choose_optimizer_layout(space, 32_768)
    frugal = frugal_space(space)
    assert len(frugal.profiles) == len(space.profiles)
    assert all(p.scheme.recompute is Recompute.FULL for p in frugal.profiles)
    assert max(c.max_seq_len for c in scheme_capacities(frugal, layout)) >= 32_768
