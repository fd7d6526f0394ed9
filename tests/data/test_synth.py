import numpy as np
import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.data.synth import LongTail, synth_lengths


def test_deterministic_by_seed():
    assert synth_lengths(1000, seed=4).tolist() == synth_lengths(1000, seed=4).tolist()
    assert synth_lengths(1000, seed=4).tolist() != synth_lengths(1000, seed=5).tolist()


def test_body_and_tail_follow_their_laws():
    shape = LongTail(body_mu=5.0, body_sigma=0.5, tail_start=10_000, tail_alpha=2.0, tail_share=0.1, max_len=10**9)
    lengths = synth_lengths(200_000, shape, seed=1)
    tail = lengths[lengths >= 10_000]
    assert len(tail) / lengths.size == pytest.approx(0.1, abs=0.005)
    assert np.median(lengths[lengths < 10_000]) == pytest.approx(np.exp(5.0), rel=0.03)
    assert np.mean(tail > 20_000) == pytest.approx(0.5**2.0, abs=0.01)


def test_defaults_put_about_a_quarter_of_tokens_above_8k_and_respect_the_cap():
    lengths = synth_lengths(200_000)
    above = lengths > 8192
    assert 0.2 < lengths[above].sum() / lengths.sum() < 0.35
    assert lengths.min() >= 1 and lengths.max() <= LongTail().max_len


def test_without_a_tail_every_length_is_from_the_body():
    lengths = synth_lengths(10_000, LongTail(body_mu=2.0, body_sigma=0.1, tail_share=0.0))
    assert lengths.max() < 20


@pytest.mark.parametrize("call, needle", [
    (lambda: synth_lengths(0), "docs: 0 must be between 1 and 16777216"),
    (lambda: LongTail(tail_alpha=0.0), "tail_alpha: 0.0 must be > 0"),
    (lambda: LongTail(tail_share=1.5), "tail_share: 1.5 must be between 0 and 1"),
    (lambda: LongTail(body_sigma=-1.0), "body_sigma: -1.0 must be between 0 and 10"),
    (lambda: LongTail(tail_start=8192, max_len=100), "max_len: 100 must be >= tail_start = 8192"),
])
def test_bad_parameters(call, needle):
    with pytest.raises(HydraulisError, match=needle):
        call()
