import pytest
import torch

from hydraulis.base.errors import HydraulisError
from hydraulis.runtime.memory.peak import PeakMemory, check_budget


def test_the_error_names_the_step_the_rank_and_the_bytes():
    check_budget(100, 3, [90, 100], [10, 20])
    with pytest.raises(HydraulisError, match=r"device_memory: 100 is exceeded at step 3 by rank 1: peak 130 bytes "
                                             r"\(held 20 \+ step 110\)"):
        check_budget(100, 3, [90, 130, 120], [10, 20, 30])


def test_the_peak_is_what_the_rank_holds_plus_the_most_the_step_created():
    weights = torch.zeros(1000)
    meter = PeakMemory(torch.device("cpu"))
    with meter.step([weights, weights[:10], None]):
        a = torch.ones(500)
        b = a * 2
        del a, b
        c = torch.ones(200)
        c.add_(1)
    assert meter.held == 4000
    assert meter.peak_bytes == 4000 + 4000
