"""The propagation issues its buckets in the order the forwards need them (design §9.4): the
shards of a stage are in order of use and their buckets never increase along it, and every
rank issues every bucket once, in one order."""

from dataclasses import replace
from itertools import pairwise
from types import SimpleNamespace

import pytest
import torch

from hydraulis.errors import HydraulisError
from hydraulis.runtime.optimizer.exchange import Propagation
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
        self.plan = SimpleNamespace(forward_order=(2, 0, 1))
        self.world = _RecordingWorld()
        self.sent = self.received = {False: [[1]] * self.buckets}
        self.copied: list[int] = []

    def pack_weights(self, master, dtype, bucket):
        return torch.tensor([float(bucket)], dtype=dtype)

    def copy_received(self, incoming, params, bucket):
        self.copied.append(bucket)


def test_propagation_issues_in_the_routes_forward_order_and_delivers_what_is_needed():
    route = _Route()
    propagation = Propagation(route, torch.zeros(1), [], torch.float32, WallClock())
    assert route.world.issued == [2, 0, 1]
    propagation.need([2])
    propagation.finish()
    assert route.copied == [2, 0, 1]


@pytest.mark.parametrize("spec,layout,world", CASES)
def test_every_rank_propagates_every_bucket_once_in_one_order(spec, layout, world):
    _, every = routes(spec, layout, world, (20_000, 5_000))
    orders = {route.plan.forward_order for route in every}
    assert len(orders) == 1
    assert sorted(orders.pop()) == list(range(every[0].buckets))


def test_a_plan_whose_forward_order_misses_a_bucket_is_refused():
    plan = routes("1,1,2x2", (4, 1, 1), 4, (20_000, 5_000))[1][0].plan
    with pytest.raises(HydraulisError, match="forward_order"):
        replace(plan, forward_order=plan.forward_order[1:])


def test_without_a_clock_no_bucket_is_timed():
    route = _Route()
    timed = Propagation(route, torch.zeros(1), [], torch.float32, WallClock())
    untimed = Propagation(route, torch.zeros(1), [], torch.float32, None)
    timed.finish()
    untimed.finish()
    assert len(timed.exchanges.intervals_ms()) == 3 and untimed.exchanges.intervals_ms() == []
