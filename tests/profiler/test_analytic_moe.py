"""The analytic cost of a mixture of experts: the routed experts' work and all-to-alls
(:mod:`hydraulis.profiler.analytic_moe`), expert parallelism in schemes, spaces and memory."""

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.types import Cluster, OptimizerLayout, Recompute, Scheme, SchemeOptions
from hydraulis.cost.memory import memory_breakdown
from hydraulis.profiler.analytic import (
    analytic_memory_model,
    analytic_profile,
    analytic_scheme_space,
    expert_degrees,
)
from hydraulis.profiler.analytic_moe import routed_layer_time
from hydraulis.sharding.activations import (
    Widths,
    layer_bytes_per_token,
    routed_bytes_per_token,
)
from hydraulis.sharding.states import layer_elements

H100 = device_preset("h100-80g")
CLUSTER = Cluster(1024, 8, "h100-80g")
MIXTRAL = model_preset("mixtral-8x7b")


def test_worked_example():
    time = routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, True, 8, Recompute.NONE, 2)
    work = 1.25 * 6 * 2 * 3 * 4096 * 14336 / (8 * 989e9 * 0.5)
    moved = 1.25 * 4 * 2 * 2 * 4096 * 7 / 8 / (8 * 450e6)
    assert time.b == pytest.approx(work + moved) and time.b == pytest.approx(6.9e-4, rel=0.05)
    assert time.c == pytest.approx(4 * 25e-3) and time.a == 0


def test_a_dense_model_has_no_routed_terms():
    assert routed_layer_time(model_preset("llama-7b"), H100, CLUSTER, 1, 8, True, 1, Recompute.NONE, 2).b == 0
    assert routed_bytes_per_token(Widths.of(model_preset("llama-7b"), Scheme(1, 8, 1)), 2) == 0


def test_expert_parallelism_trades_memory_for_all_to_all_and_imbalance():
    times = {ep: routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, True, ep, Recompute.NONE, 2) for ep in (1, 2, 8)}
    assert times[1].b < times[2].b < times[8].b and times[1].c == 0 < times[2].c
    held = {ep: layer_elements(MIXTRAL, Scheme(1, 8, 1, True, ep=ep), 0) for ep in (1, 2, 8)}
    assert held[1] > held[2] > held[8]
    assert held[1] - held[8] == MIXTRAL.routed_params_per_layer * 7 // 8


def test_all_to_all_across_nodes_pays_the_network():
    qwen3 = model_preset("qwen3-30b-a3b")
    wide = routed_layer_time(qwen3, H100, CLUSTER, 1, 16, True, 16, Recompute.NONE, 2)
    narrow = routed_layer_time(qwen3, H100, CLUSTER, 1, 16, True, 8, Recompute.NONE, 2)
    assert wide.b > narrow.b * 2  # 16 ranks span two nodes of 8


def test_recomputation_runs_experts_and_dispatch_again():
    plain = routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, True, 8, Recompute.NONE, 2)
    full = routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, True, 8, Recompute.FULL, 2)
    assert full.b == pytest.approx(plain.b * 4 / 3, rel=0.02) and full.c == pytest.approx(plain.c * 1.5)


def test_without_sp_or_ep_the_tp_ranks_repeat_the_mixture():
    replicated = routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, False, 1, Recompute.NONE, 2)  # without sp
    split = routed_layer_time(MIXTRAL, H100, CLUSTER, 1, 8, True, 1, Recompute.NONE, 2)
    assert replicated.b == pytest.approx(8 * split.b)
    assert (routed_bytes_per_token(Widths.of(MIXTRAL, Scheme(1, 8, 1)), 2)
            == pytest.approx(8 * routed_bytes_per_token(Widths.of(MIXTRAL, Scheme(1, 8, 1, True)), 2)))


def test_expert_parallelism_lets_a_scheme_hold_the_model():
    memory = analytic_memory_model(MIXTRAL, H100)
    layout = OptimizerLayout(1024, 1, 1)
    held = {ep: memory_breakdown(memory, MIXTRAL, analytic_profile(MIXTRAL, H100, CLUSTER, Scheme(1, 8, 1, True, ep=ep)),
                                 layout).max_seq_len for ep in (1, 8)}
    assert held[1] == 0 < held[8]


def test_a_mixtures_space_lists_every_expert_degree_and_variant():
    space = analytic_scheme_space(MIXTRAL, H100, CLUSTER, (1, 2), (1, 8), (1,), "now", "test", segments=True)
    schemes = {p.scheme for p in space.profiles}
    assert Scheme(1, 8, 1, True, Recompute.FULL, ep=8) in schemes and all(s.sp for s in schemes if s.ep > 1)
    assert {s.ep for s in schemes if (s.cp, s.tp) == (2, 8)} == {1, 8}
    assert {s.ep for s in schemes if (s.cp, s.tp) == (2, 1)} == {1}
    assert not space.segments
    assert expert_degrees(model_preset("qwen3-30b-a3b"), 8) == (1, 8)
    assert expert_degrees(MIXTRAL, 16) == (1,)
    assert expert_degrees(model_preset("llama-7b"), 8) == (1,)


@pytest.mark.parametrize("text, words", [
    ("1,2,1[sp,ep=4]", "must divide scheme.tp"),
    ("2,2,1[ep=2]", "needs sp"),
    ("1,2,1[ep=0]", "must be ep=N with N ≥ 1"),
    ("1,2,1[ep=2,ep=2]", "is given twice"),
])
def test_bad_expert_degrees_are_refused(text, words):
    from hydraulis.job.strategy_spec import parse_strategy_spec
    with pytest.raises(HydraulisError, match=words):
        parse_strategy_spec(text)


def test_options_round_trip_and_models_check_the_degree():
    options = SchemeOptions.parse("sp,ep=4")
    assert options.scheme(1, 4, 2) == Scheme(1, 4, 2, True, ep=4) and str(options.scheme(1, 4, 2)) == "(1,4,2)[sp,ep=4]"
    with pytest.raises(HydraulisError, match="needs a mixture of experts"):
        model_preset("llama-7b").check_scheme(Scheme(1, 2, 1, True, ep=2))
    with pytest.raises(HydraulisError, match="must divide model.experts"):
        MIXTRAL.check_scheme(Scheme(1, 16, 1, True, ep=16))


def test_routed_bytes_count_every_copy_on_the_busiest_rank():
    widths = Widths.of(MIXTRAL, Scheme(1, 8, 1, True, ep=8))
    copies = 1.25 * 2 * (2 * 2 * 4096 + 4 * 2 * 14336)
    assert routed_bytes_per_token(widths, 2) == pytest.approx((4 * 8 + 12 * 2 + copies) / 8)
    assert layer_bytes_per_token(widths, Recompute.NONE, 2) > routed_bytes_per_token(widths, 2)
