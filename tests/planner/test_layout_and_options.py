import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout, Scheme
from hydraulis.planner.layout import choose_optimizer_layout
from hydraulis.planner.options import planning_space, scheme_options
from tests.conftest import analytic_space


def test_the_reference_pool_gets_plain_zero1(space_7b):
    space = planning_space(space_7b, 32, 8)
    layout, why = choose_optimizer_layout(space, 32768)
    assert layout == OptimizerLayout(32, 1, 1)
    assert why.startswith("optimizer layout dp32·tp1·pp1: of ") and "with the fewest model-parallel degrees" in why


def test_a_given_layout_is_checked_not_replaced(space_7b):
    space = planning_space(space_7b, 32, 8)
    assert choose_optimizer_layout(space, 32768, OptimizerLayout(8, 4, 1))[0] == OptimizerLayout(8, 4, 1)
    with pytest.raises(HydraulisError, match="does not divide the 32 devices"):
        choose_optimizer_layout(space, 32768, OptimizerLayout(3, 1, 1))


def test_a_length_nothing_holds(space_7b):
    with pytest.raises(HydraulisError, match=r"^max_seq_len: 500000 exceeds the longest sequence any scheme can "
                                             r"hold on 32 devices \(137983 tokens, scheme \(1,16,1\)"):
        choose_optimizer_layout(planning_space(space_7b, 32, 8), 500_000)


def test_options_leave_out_what_cannot_run_and_what_is_dominated(space_32b_analytic):
    space = planning_space(space_32b_analytic, 1024, 8)
    layout, _ = choose_optimizer_layout(space, 32768)
    options, notes = scheme_options(space, layout, 8)
    kept = {o.scheme for o in options}
    assert Scheme(1, 1, 1) not in kept and "(1,1,1) left out: its model states leave no memory for activations" in notes
    dominated = [n for n in notes if "dominated by" in n]
    assert dominated
    by_name = {str(o.scheme): o for o in options}
    for note in dominated:
        loser, winner = note.split(" ")[0], note.split(" ")[-1]
        assert loser not in by_name and winner in by_name
        scheme = next(p.scheme for p in space.profiles if str(p.scheme) == loser)
        assert scheme.devices == by_name[winner].devices


def test_small_clusters(space_7b):
    space = planning_space(space_7b, 4, 8)
    layout, _ = choose_optimizer_layout(space, 8192)
    options, notes = scheme_options(space, layout, 4)
    assert {o.devices for o in options} <= {2, 4}
    assert any("more than the 4 planned" in n for n in notes)
    with pytest.raises(HydraulisError, match=r"^devices: 1 is smaller than every scheme of the space"):
        planning_space(space_7b, 1, 8)


def test_a_scheme_with_other_options_is_another_option(space_7b):
    from dataclasses import replace

    from hydraulis.base.types import Recompute

    plain = next(p for p in space_7b.profiles if p.scheme == Scheme(1, 8, 1))
    slower = replace(plain, scheme=replace(plain.scheme, recompute=Recompute.FULL),
                     time=replace(plain.time, b=plain.time.b * 1.3),
                     activation_bytes_per_token=plain.activation_bytes_per_token / 4)
    space = planning_space(replace(space_7b, profiles=space_7b.profiles + (slower,)), 32, 8)
    options, _ = scheme_options(space, OptimizerLayout(32, 1, 1), 8)
    by_scheme = {o.scheme: o for o in options}
    assert by_scheme[slower.scheme].capacity > 3 * by_scheme[plain.scheme].capacity
    assert by_scheme[slower.scheme].time.b > by_scheme[plain.scheme].time.b


def test_the_whole_loss_prices_less_room_than_chunks_with_a_large_vocabulary():
    space = planning_space(analytic_space("llama-1b", devices=64), 64, 8)
    layout = OptimizerLayout(64, 1, 1)
    chunked = {o.scheme: o.capacity for o in scheme_options(space, layout, 8)[0]}
    whole = {o.scheme: o.capacity for o in scheme_options(space, layout, 8, loss_chunk=0)[0]}
    assert set(whole) <= set(chunked) and all(whole[s] <= chunked[s] for s in whole)
    assert whole[Scheme(1, 1, 1)] < 0.5 * chunked[Scheme(1, 1, 1)]
