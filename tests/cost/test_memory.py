"""Memory model against the original system's formula (original pools' README), the runtime's
own step terms (one parameter's gradient, the exchanges' buffers: :mod:`hydraulis.sharding.step_memory`)
set aside — they only shorten the longest sequence."""

import math
from dataclasses import replace

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout, Scheme
from hydraulis.cost import MemoryLimit, memory_breakdown, scheme_capacities
from tests.conftest import analytic_space, load_pool

LAYOUTS = [OptimizerLayout(8, 4, 1), OptimizerLayout(16, 2, 2), OptimizerLayout(64, 1, 1), OptimizerLayout(4, 8, 2)]


def reference_max_seq_len(pool: dict, tp: int, pp: int, layout: OptimizerLayout) -> float:
    """The README's formula, written out independently of the library."""
    reg, model, cluster = pool["memory_regression"], pool["model_config"], pool["cluster_config"]
    h, layers, vocab = model["H"], model["L"], model["V"]
    alpha, b = reg["alpha"], reg["B"]
    states = (layers / layout.pp) * (h * h / layout.tp) * b * alpha / layout.dp
    states += (layers / pp) * (h * h / tp) * b * (1 - alpha)
    emb_compute = h * vocab / tp * (32 if pp == 1 else 16)
    emb_optimizer = h * vocab / layout.tp * (32 if layout.pp == 1 else 16)
    states += emb_compute * (1 - alpha) + emb_optimizer * alpha / layout.dp
    gap = reg["gap"][f"gpu{tp}" if tp < 8 else "node"]
    free = cluster["gpu_memory_bound"] - reg["safe_bound"] - states - gap
    return free / (layers * (h / tp) * reg["A"][f"tp{tp}"])


@pytest.mark.parametrize("name", ["7b", "13b"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_max_seq_len_matches_the_original_formula(name, layout, request):
    space = request.getfixturevalue(f"space_{name}")
    pool = load_pool(name)
    for capacity in scheme_capacities(space, layout):
        scheme = capacity.profile.scheme
        expected = max(0.0, reference_max_seq_len(pool, scheme.tp, scheme.pp, layout))
        assert abs(_original(capacity.memory).max_seq_len - expected) <= max(128, 0.01 * expected), scheme
        assert capacity.max_seq_len <= _original(capacity.memory).max_seq_len


def test_worked_example_of_the_docstring(space_7b):
    capacity = {c.profile.scheme: c for c in scheme_capacities(space_7b, OptimizerLayout(8, 4, 1))}
    one_one_two = next(c for s, c in capacity.items() if (s.tp, s.pp) == (1, 2))
    assert one_one_two.memory.states == pytest.approx(17.33e9, rel=1e-3)
    assert _original(one_one_two.memory).max_seq_len == pytest.approx(11_279, abs=2)
    assert one_one_two.max_seq_len == pytest.approx(11_279 - one_one_two.memory.gradient / 4.98e6, abs=2)


def _original(memory):
    """``memory`` without the runtime's step terms (:class:`hydraulis.cost.memory.MemoryBreakdown`)."""
    return replace(memory, gradient=0.0, exchange=0.0)


def test_more_sharding_holds_longer_sequences(space_7b):
    rows = {(c.profile.scheme.tp, c.profile.scheme.pp): c.max_seq_len
            for c in scheme_capacities(space_7b, OptimizerLayout(8, 4, 1))}
    assert rows[(1, 2)] < rows[(2, 2)] < rows[(4, 2)] < rows[(8, 2)]
    assert rows[(1, 2)] < rows[(1, 4)] < rows[(1, 8)]


def test_states_larger_than_memory_give_zero_and_say_why(space_32b_analytic):
    capacities = scheme_capacities(space_32b_analytic, OptimizerLayout(128, 8, 1))
    single = next(c for c in capacities if c.profile.scheme.devices == 1)
    assert single.max_seq_len == 0
    assert single.memory.limit is MemoryLimit.MODEL_STATES
    headroom = single.memory.headroom_bytes(0)
    assert headroom < 0 and math.isfinite(headroom)


def test_layout_not_dividing_devices_is_rejected(space_7b):
    with pytest.raises(HydraulisError, match="optimizer_layout"):
        scheme_capacities(space_7b, OptimizerLayout(3, 4, 1))


@pytest.mark.parametrize("devices, layout", [(1, OptimizerLayout(1, 1, 1)), (4, OptimizerLayout(1, 1, 4))])
def test_a_scheme_that_owns_what_it_computes_holds_neither_exchange_nor_main_gradients(devices, layout):
    """One owner (:func:`hydraulis.sharding.step_memory.one_owner`): the scheme that fills the
    devices under a layout of its own stages has ``X = 0`` and, in bf16, 2 of its 6 compute bytes
    per parameter (the main gradients are the optimizer's fp32 gradient); beside other ranks, or
    on unknown devices, the same scheme keeps both."""
    space = analytic_space("llama-7b", "h200", devices)
    alone = next(c for c in scheme_capacities(space, layout) if c.profile.scheme == Scheme(1, 1, devices))
    shared = next(c for c in scheme_capacities(analytic_space("llama-7b", "h200", 2 * devices), layout)
                  if c.profile.scheme == Scheme(1, 1, devices)).memory
    unknown = memory_breakdown(space.memory, space.model, alone.profile, layout)
    assert alone.memory.exchange == 0 < unknown.exchange
    assert alone.memory.compute_states == pytest.approx(unknown.compute_states * 2 / 6, rel=1e-12)
    assert shared.exchange > 0 and shared.compute_states == pytest.approx(unknown.compute_states, rel=1e-12)
    assert alone.max_seq_len > unknown.max_seq_len
