"""The propagation issues its buckets in the order the forwards need them (design §9.4): the
shards of a stage are in order of use and their buckets never increase along it, so every rank
issues every bucket once, last first; the reduction issues in bucket order as buckets get ready."""

from itertools import pairwise
from types import SimpleNamespace

import pytest
import torch

from hydraulis.runtime.optimizer.exchange import Propagation, Reduction
from hydraulis.runtime.parallel.operations import WallClock
from tests.runtime.optimizer.test_routes import CASES, routes


@pytest.mark.parametrize("spec,layout,world", CASES)
def test_buckets_never_increase_along_a_stages_order_of_use(spec, layout, world):
    _, every = routes(spec, layout, world, (20_000, 5_000))
    for route in every:
        order = route.plan.shard_buckets
        assert all(a >= b for a, b in pairwise(order)), (spec, route.plan.rank, order)


class _RecordingWorld:
    """A one-rank world that completes each exchange at once and notes the buckets issued."""

    def __init__(self) -> None:
        self.issued: list[int] = []

    def all_to_all_start(self, tensor, output_splits, input_splits):
        self.issued.append(int(tensor[0]))
        return tensor.clone(), None


class _Route:
    buckets = 3

    def __init__(self) -> None:
        self.plan = SimpleNamespace(shard_buckets=(1, 0))
        self.world = _RecordingWorld()
        self.sent = self.received = {reduce: [[1]] * self.buckets for reduce in (False, True)}
        self.copied: list[int] = []

    def pack_weights(self, master, dtype, bucket):
        return torch.tensor([float(bucket)], dtype=dtype)

    def copy_received(self, incoming, params, bucket):
        self.copied.append(bucket)

    def pack_gradients(self, grads, device, bucket):
        return torch.tensor([float(bucket)])


def test_propagation_issues_last_bucket_first_and_delivers_what_is_needed():
    route = _Route()
    propagation = Propagation(route, torch.zeros(1), [], torch.float32, WallClock())
    assert route.world.issued == [2, 1, 0]
    propagation.need([1])
    propagation.finish()
    assert route.copied == [1, 0, 2]


def test_reduction_issues_in_order_once_ready_and_a_bucket_it_holds_nothing_of_with_the_last():
    """The rank holds buckets 0 and 1 of ``K = 3``: bucket 1 ready first waits for 0; bucket 2,
    none of its gradients, leaves right after 1."""
    route = _Route()
    reduction = Reduction(route, lambda: [], torch.float32, torch.device("cpu"), None)
    reduction.ready(1)
    assert route.world.issued == []
    reduction.ready(0)
    assert route.world.issued == [0, 1, 2]


def test_without_a_clock_no_bucket_is_timed():
    route = _Route()
    timed = Propagation(route, torch.zeros(1), [], torch.float32, WallClock())
    untimed = Propagation(route, torch.zeros(1), [], torch.float32, None)
    timed.finish()
    untimed.finish()
    assert len(timed.exchanges.intervals_ms()) == 3 and untimed.exchanges.intervals_ms() == []
