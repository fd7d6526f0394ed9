import pytest

from hydraulis.profiler.measurement import overlap_share


@pytest.mark.parametrize("exchange, compute, both, share", [
    (10.0, 12.0, 15.0, 0.7), (10.0, 12.0, 12.0, 1.0), (10.0, 12.0, 22.0, 0.0), (10.0, 12.0, 30.0, 0.0),
    (10.0, 12.0, 9.0, 1.0), (0.0, 12.0, 12.0, 0.0)])
def test_overlap_share_is_the_hidden_part_of_the_shorter_clipped(exchange, compute, both, share):
    assert overlap_share(exchange, compute, both) == pytest.approx(share)
