import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.stages import parse_stages
from hydraulis.base.types import OptimizerLayout, Scheme, TimeCoefficients
from hydraulis.cost import reduce_ms, step_time_ms
from hydraulis.cost.step import implied_reduce_gbps, sharding


def test_microbatch_time_worked_example():
    time = TimeCoefficients(a=1.0266e-6, b=0.04907, c=31.87)
    assert time.microbatch_ms([8192, 1024, 1024]) == pytest.approx(605.4, abs=0.1)


def test_sequence_time_has_no_fixed_term():
    time = TimeCoefficients(a=1.0, b=2.0, c=100.0)
    assert list(time.work_ms([1, 3])) == [3.0, 15.0]


def test_reduce_worked_example():
    params = model_preset("llama-7b").params
    schemes = [Scheme(1, 8, 1), Scheme(1, 4, 1)]
    assert reduce_ms(params, schemes, OptimizerLayout(8, 4, 1), 25.0) == pytest.approx(270, rel=0.01)


def test_one_pipeline_in_the_optimizer_layout_needs_no_reduction():
    assert reduce_ms(10**9, [Scheme(1, 4, 2)], OptimizerLayout(1, 4, 2), 25.0) == 0.0
    assert reduce_ms(10**9, [Scheme(1, 4, 2)] * 2, OptimizerLayout(2, 4, 2), 0.0) == 0.0


def test_step_time_is_slowest_pipeline_plus_reduction():
    assert step_time_ms([3.0, 9.0, 4.0], 1.5) == 10.5


def test_a_staged_scheme_reduces_the_share_of_its_most_loaded_stage():
    staged = Scheme.staged(1, parse_stages("1|4:20>2:12")[1])
    assert sharding(staged) == pytest.approx(2 * 32 / 12)
    assert sharding(Scheme.staged(1, parse_stages("1|2:16>2:16")[1])) == sharding(Scheme(1, 2, 2)) == 4
    layout = OptimizerLayout(4, 1, 1)
    assert reduce_ms(10**9, [staged, Scheme(1, 8, 1)], layout, 25.0) == pytest.approx(4e9 / (64 / 12) / 2.5e7)


def test_the_implied_bandwidth_predicts_the_reduction_back():
    params = model_preset("tiny").params
    gbps = implied_reduce_gbps(params, [Scheme(1, 1, 1)], 8.0)
    assert gbps == pytest.approx(0.158, rel=1e-3)
    assert reduce_ms(params, [Scheme(1, 1, 1)] * 4, OptimizerLayout(4, 1, 1), gbps) == pytest.approx(8.0)
    with pytest.raises(HydraulisError, match="reduction_ms"):
        implied_reduce_gbps(params, [Scheme(1, 1, 1)], 0.0)

def test_the_implied_bandwidth_of_staged_pipelines_inverts_their_reduction():
    staged = Scheme.staged(1, parse_stages("1|4:20>2:12")[1])
    time = reduce_ms(10**9, [staged, Scheme(1, 8, 1)], OptimizerLayout(4, 1, 1), 25.0)
    assert implied_reduce_gbps(10**9, [staged, Scheme(1, 8, 1)], time) == pytest.approx(25.0)
