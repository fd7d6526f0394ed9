import random

from hydraulis.job.overlap import covered, length, reduction_overlap, union


def test_worked_example():
    assert reduction_overlap([[(10, 14), (12, 20)]], [(0, 11), (15, 16)]) == (10, 2.0)


def test_hidden_never_exceeds_in_flight_and_equals_it_under_a_full_cover():
    rng = random.Random(0)
    for _ in range(200):
        spans = [sorted((rng.uniform(0, 50), rng.uniform(0, 50))) for _ in range(rng.randint(0, 6))]
        cover = [sorted((rng.uniform(0, 50), rng.uniform(0, 50))) for _ in range(rng.randint(0, 6))]
        hidden = covered(spans, cover)
        assert -1e-9 <= hidden <= length(spans) + 1e-9
        assert abs(covered(spans, [(0, 50)]) - length(spans)) < 1e-9
        assert all(a < b for a, b in union(spans))
