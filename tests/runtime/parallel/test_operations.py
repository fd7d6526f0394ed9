"""The operation recorder on one process: it notes what the 1F1B executor calls, in order, and
changes nothing of what the work returns."""

import torch

from hydraulis.runtime.parallel.operations import RecordingWork, step_clock
from hydraulis.runtime.parallel.pipeline import StageLink, run_1f1b
from hydraulis.runtime.rank_map import HandOff


class CountingWork:
    """Forward returns ``j``, backward ``-j``; both note the call; scalars travel."""

    def __init__(self) -> None:
        self.calls = []

    def shape(self, j):
        return ()

    def forward(self, j, received):
        self.calls.append(("F", j))
        return torch.tensor(float(j))

    def backward(self, j, grad):
        self.calls.append(("B", j))
        return torch.tensor(-float(j))


def test_a_single_stage_records_forward_then_backward_of_each_micro_batch_in_time_order():
    work = CountingWork()
    recording = RecordingWork(work, step_clock(torch.device("cpu")))
    run_1f1b(recording, StageLink(HandOff(None, (), None, ()), torch.device("cpu"), torch.float32), 3, 1, 0)
    rows = recording.rows()
    assert [(("F" if forward else "B"), j) for j, forward, _, _ in rows] == work.calls == \
        [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]
    assert all(0 <= start <= end for _, _, start, end in rows)
    assert all(a[3] <= b[2] for a, b in zip(rows, rows[1:]))
    assert recording.forward(7, None).item() == 7.0 and recording.backward(7, None).item() == -7.0
