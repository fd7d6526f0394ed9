"""The equivalence check catches real distribution bugs: each fault of :mod:`tests.runtime.faults`,
injected into the ranks, makes ``max_rel_diff`` exceed 1e-3 with ``hydraulis check-equivalence``'s
defaults (tiny, 2 steps, Adam lr 1e-4, fp32), while the same strategies without a fault stay
within 1e-5. All cases share one spawned job of 2 processes."""

import dataclasses
import functools

import pytest

import hydraulis.runtime.equivalence as equivalence
from hydraulis.cli.check_equivalence import DEFAULT_RUNTIME
from hydraulis.job.config import TrainConfig
from hydraulis.runtime.equivalence import check_equivalence
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind
from tests.runtime import faults

pytestmark = pytest.mark.distributed

OPTIONS = dataclasses.replace(DEFAULT_RUNTIME, device=DeviceKind.CPU)
STRATEGY = {
    "norm gradient per tp rank": "1,2,1",
    "tp all-reduce missing in backward": "1,2,1",
    "loss normalised per pipeline": "1,1,1x2",
    "cp chunks in wrong order": "2,1,1",
    "pp stage gradient dropped": "1,1,2",
}
CASES = [(fault, STRATEGY[fault]) for fault in faults.FAULTS] + [(None, spec) for spec in sorted(set(STRATEGY.values()))]


@pytest.fixture(scope="module")
def results():
    runs = [resolve_run(TrainConfig("tiny", (spec,), 2, runtime=OPTIONS)) for _, spec in CASES]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(equivalence, "_distributed_job",
                      functools.partial(faults.job_with_faults, tuple(fault for fault, _ in CASES)))
        outcome = check_equivalence(runs, OPTIONS, nproc=2)
    return dict(zip(CASES, outcome))


@pytest.mark.parametrize("fault", sorted(faults.FAULTS))
def test_each_fault_exceeds_1e_3(results, fault):
    result = results[fault, STRATEGY[fault]]
    assert result.max_grad_rel_diff > 1e-3, (fault, result.worst_parameter)
    assert result.max_rel_diff > 1e-3


@pytest.mark.parametrize("spec", sorted(set(STRATEGY.values())))
def test_the_same_strategies_without_a_fault_pass(results, spec):
    result = results[None, spec]
    assert result.max_rel_diff <= 1e-5, (spec, result.worst_parameter, result.max_rel_diff)
