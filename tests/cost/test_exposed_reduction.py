import pytest

from hydraulis.base.stages import Stage
from hydraulis.base.types import OptimizerLayout, PipelineGroup, PipelineModel, Scheme, TimeCoefficients
from hydraulis.cost.step import ReductionModel, exposed_reduce_ms, reduce_ms

P = 6_740_000_000


def group(scheme: Scheme, b: float = 0.6, seq: int = 1000) -> PipelineGroup:
    return PipelineGroup(scheme, 1, seq, TimeCoefficients(0.0, b, 0.0))


def test_worked_example():
    g = group(Scheme(1, 4, 1))
    assert exposed_reduce_ms(P, [g, g], OptimizerLayout(8, 4, 1), ReductionModel(25.0, 0.9)) == pytest.approx(28.83,
                                                                                                             abs=0.01)
    fp32 = ReductionModel(25.0, 0.9, gradient_bytes=4)
    assert exposed_reduce_ms(P, [g, g], OptimizerLayout(8, 4, 1), fp32) == pytest.approx(41.85, abs=0.01)


@pytest.mark.parametrize("scheme", [Scheme(1, 4, 1), Scheme(1, 2, 4)])
def test_fp32_gradients_move_six_bytes_per_parameter_against_four(scheme):
    layout = OptimizerLayout(16, 1, 1)
    assert reduce_ms(P, [scheme, scheme], layout, 25.0, 4) == pytest.approx(1.5 * reduce_ms(P, [scheme, scheme], layout,
                                                                                               25.0))


@pytest.mark.parametrize("scheme", [Scheme(1, 4, 1), Scheme(1, 2, 4), Scheme(2, 8, 1)])
def test_no_overlap_charges_the_full_reduction_and_overlap_never_adds(scheme):
    layout = OptimizerLayout(16, 1, 1)
    g = group(scheme)
    full = reduce_ms(P, [scheme, scheme], layout, 25.0)
    assert exposed_reduce_ms(P, [g, g], layout, ReductionModel(25.0, 0.0)) == pytest.approx(full)
    previous = full
    for omega in (0.25, 0.5, 0.75, 1.0):
        exposed = exposed_reduce_ms(P, [g, g], layout, ReductionModel(25.0, omega))
        assert exposed <= previous + 1e-9
        previous = exposed


def test_a_short_backward_hides_less():
    layout, model = OptimizerLayout(16, 1, 1), ReductionModel(25.0, 1.0, pipeline_model=PipelineModel(p2p_ms=1.0))
    long, short = group(Scheme(1, 4, 1), b=0.6), group(Scheme(1, 4, 1), b=0.01)
    assert exposed_reduce_ms(P, [short, short], layout, model) > exposed_reduce_ms(P, [long, long], layout, model)
    assert exposed_reduce_ms(P, [short, short], layout, model) <= reduce_ms(P, [Scheme(1, 4, 1)] * 2, layout, 25.0)


def test_one_pipeline_in_the_optimizer_layout_and_no_bandwidth_reduce_nothing():
    g = group(Scheme(1, 4, 2))
    assert exposed_reduce_ms(P, [g], OptimizerLayout(1, 4, 2), ReductionModel(25.0, 0.5)) == 0.0
    assert exposed_reduce_ms(P, [g, g], OptimizerLayout(2, 4, 2), ReductionModel(0.0, 0.5)) == 0.0


def test_a_later_stages_gradients_wait_for_the_first_stages_buckets():
    """``1|4:20>2:12`` with P = 3.2e9 at 25 GB/s, t = 60 ms, ω = 1: stage 1 holds 6e8 elements
    (R_g = R_w = 48 ms, n = 47), stage 0 5e8 (40 ms, n = 40). The k-th all-to-all carries every
    stage's bucket k, so stage 1's gradients get no slack from stage 0's longer backward:
    E_g = (48 − 40) + 40/47 ≈ 8.85; the weights keep it: E_w = max(20 + 20/40, 28 + 20/47 − 20)
    = 20.5; X ≈ 29.35 ms."""
    staged = PipelineGroup(Scheme.staged(1, (Stage(4, 20), Stage(2, 12))), 1, 1000, TimeCoefficients(0.0, 0.06, 0.0))
    exposed = exposed_reduce_ms(3_200_000_000, [staged, staged], OptimizerLayout(12, 1, 1), ReductionModel(25.0, 1.0))
    assert exposed == pytest.approx(8 + 40 / 47 + 20.5)
