"""The overlapped reduction measured honestly: with ``--no-overlap-reduction`` every bucket
leaves after its rank's own backward, so the share of the reduction hidden behind that rank's
backward is ~0; with the overlap, some of it is hidden (design §9.4). Both trainings run in one
spawned job of 4 processes (:mod:`tests.runtime.jobs`)."""

import pytest

from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.records import summarize
from hydraulis.layout.kinds import DeviceKind, OptimizerKind
from hydraulis.runtime.run import resolve_run
from tests.runtime.jobs import train_in_one_job

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

OVERLAP = (False, True)


def options(overlap: bool) -> RuntimeOptions:
    return RuntimeOptions(device=DeviceKind.CPU, optimizer=OptimizerKind.SGD, lr=0.1, record_operations=True,
                          overlap_reduction=overlap)


@pytest.fixture(scope="module")
def records():
    trainings = [(resolve_run(TrainConfig("tiny", ("1,1,2x2",), 2, token_budget=512, nproc=4,
                                          runtime=options(overlap))), options(overlap)) for overlap in OVERLAP]
    return dict(zip(OVERLAP, train_in_one_job(trainings, 4)))


@pytest.mark.parametrize("overlap", OVERLAP)
def test_hidden_fraction_counts_each_ranks_own_backward(records, overlap):
    assert len(records[overlap]) == 2 and all(r.reduction_inflight_ms > 0 for r in records[overlap])
    hidden = summarize(records[overlap]).reduction_hidden_fraction
    assert hidden < 0.05 if not overlap else hidden > 0
