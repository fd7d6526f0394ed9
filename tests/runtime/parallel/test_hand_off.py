"""Hand-offs between stages of different tp (design §9.2): the mapping, and a rank-level
replay of every rank's 1F1B exchanges that checks each message is sent and received in the same
order by its two ends and that the exchanges, with each stage's tp collectives, never deadlock."""

from collections import defaultdict

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from hydraulis.base.stages import Stage, hand_off_peers
from hydraulis.base.types import Scheme
from hydraulis.cost.order import one_f_one_b
from hydraulis.runtime.parallel.pipeline import StageLink, run_schedule
from hydraulis.runtime.rank_map import HandOff, RankMap, RankPlace
from hydraulis.sharding.pipeline import PipelineSplit


@given(st.integers(1, 8), st.integers(1, 8))
def test_every_rank_takes_from_exactly_the_rank_that_gives_to_it(a, b):
    for x in range(a):
        takes, gives = hand_off_peers(x, a, b)
        assert 0 <= takes < b
        for y in gives:
            assert hand_off_peers(y, b, a)[0] == x
    for y in range(b):
        giver = hand_off_peers(y, b, a)[0]
        assert y in hand_off_peers(giver, a, b)[1]


def test_worked_example_of_the_rank_map_docstring():
    rank_map = RankMap((PipelineSplit(Scheme.staged(1, (Stage(2, 3), Stage(1, 1))), (3, 1)),), 3)
    assert rank_map.hand_off(RankPlace(0, 0, 0, 0)) == HandOff(None, (), 2, (2,))
    assert rank_map.hand_off(RankPlace(0, 0, 0, 1)) == HandOff(None, (), 2, ())
    assert rank_map.hand_off(RankPlace(0, 1, 0, 0)) == HandOff(0, (0, 1), None, ())
    fan_out = RankMap((PipelineSplit(Scheme.staged(1, (Stage(1, 2), Stage(4, 2))), (2, 2)),), 5)
    assert fan_out.hand_off(RankPlace(0, 0, 0, 0)) == HandOff(None, (), 1, (1, 2, 3, 4))
    assert fan_out.hand_off(RankPlace(0, 1, 0, 3)) == HandOff(0, (), None, ())


class RecordingLink(StageLink):
    """A link that runs nothing: it notes each batch's sends ``(peer, message)`` and receives
    ``(peer, message)``, a message being ``("F"|"B", micro-batch)``."""

    def __init__(self, peers: HandOff) -> None:
        super().__init__(peers, torch.device("cpu"), torch.float32)
        self.batches: list[tuple[str, list, list]] = []

    def _exchange(self, sends, recvs):
        forward = lambda peer: peer == self.peers.previous  # noqa: E731
        self.batches.append(("p2p", [(peer, _message(t)) for t, peer in sends],
                             [(peer, ("F" if forward(peer) else "B", shape[0] - 1)) for peer, shape in recvs]))
        return [torch.full(shape, 0.0) for _, shape in recvs]


def _message(tensor: torch.Tensor) -> tuple[str, int]:
    value = int(tensor[0])
    return ("F", value) if value >= 0 else ("B", -value - 1)


class TaggedWork:
    """Forward of micro-batch ``j`` sends ``j``, its backward ``−j−1``; before each, the stage's
    tp collective (an all-reduce inside the layers) is noted on the link."""

    def __init__(self, link: RecordingLink, group: tuple, first: bool, last: bool) -> None:
        self.link, self.group, self.first, self.last = link, group, first, last

    def shape(self, j: int) -> tuple[int]:
        return (j + 1,)

    def forward(self, j, received):
        self.link.batches.append(("collective", self.group, ("F", j)))
        return None if self.last else torch.full((1,), float(j))

    def backward(self, j, grad):
        self.link.batches.append(("collective", self.group, ("B", j)))
        return None if self.first else torch.full((1,), float(-j - 1))


def _replay(layout: PipelineSplit, micro_batches: int) -> dict[int, list]:
    rank_map = RankMap((layout,), layout.scheme.devices)
    recorded = {}
    for rank in range(layout.scheme.devices):
        place = rank_map.place(rank)
        link = RecordingLink(rank_map.hand_off(place))
        group = rank_map.tp_ranks(0, place.stage, place.cp_rank)
        work = TaggedWork(link, group, place.stage == 0, place.stage == layout.scheme.pp - 1)
        run_schedule(work, link, one_f_one_b(micro_batches, layout.scheme.pp, place.stage))
        recorded[rank] = link.batches
    return recorded


def _runs_to_completion(recorded: dict[int, list]) -> bool:
    """Rendezvous semantics: a batch completes once every peer has posted the matching operation
    (the n-th message between two ranks meets the n-th), a collective once its whole group is at it."""
    position = dict.fromkeys(recorded, 0)
    posted = defaultdict(int)  # (sender, receiver, "send"|"recv") → operations posted so far

    def post(rank):
        kind, sends, recvs = recorded[rank][position[rank]]
        if kind == "p2p":
            for peer, _ in sends:
                posted[rank, peer, "send"] += 1
            for peer, _ in recvs:
                posted[peer, rank, "recv"] += 1

    for rank in recorded:
        if recorded[rank]:
            post(rank)
    progress = True
    while progress:
        progress = False
        for rank, batches in recorded.items():
            if position[rank] == len(batches):
                continue
            kind, first, second = batches[position[rank]]
            if kind == "p2p":
                ready = (all(posted[rank, peer, "recv"] >= posted[rank, peer, "send"] for peer, _ in first)
                         and all(posted[peer, rank, "send"] >= posted[peer, rank, "recv"] for peer, _ in second))
            else:
                ready = all(position[r] < len(recorded[r]) and recorded[r][position[r]][1:] == (first, second)
                            for r in first)
            if ready:
                members = first if kind == "collective" else (rank,)
                for r in members:
                    position[r] += 1
                    if position[r] < len(recorded[r]):
                        post(r)
                progress = True
    return all(position[r] == len(b) for r, b in recorded.items())


@pytest.mark.parametrize("stages, cp", [
    ((Stage(2, 3), Stage(1, 1)), 1), ((Stage(1, 1), Stage(2, 3)), 1), ((Stage(1, 1), Stage(4, 2), Stage(2, 1)), 1),
    ((Stage(2, 2), Stage(1, 1), Stage(4, 1)), 2), ((Stage(4, 2), Stage(2, 2)), 1)])
def test_every_message_meets_its_receive_in_order_and_nothing_deadlocks(stages, cp):
    layout = PipelineSplit(Scheme.staged(cp, stages), tuple(s.layers for s in stages))
    micro_batches = 3
    recorded = _replay(layout, micro_batches)
    sent, received = defaultdict(list), defaultdict(list)
    for rank, batches in recorded.items():
        for kind, sends, recvs in batches:
            if kind == "p2p":
                for peer, message in sends:
                    sent[rank, peer].append(message)
                for peer, message in recvs:
                    received[peer, rank].append(message)
    assert sent == received
    rank_map = RankMap((layout,), layout.scheme.devices)
    for rank in recorded:
        place = rank_map.place(rank)
        got = sorted(m for (_, r), messages in received.items() if r == rank for m in messages)
        expected = [("B", j) for j in range(micro_batches) if place.stage < len(stages) - 1]
        expected += [("F", j) for j in range(micro_batches) if place.stage > 0]
        assert got == expected, rank
    assert _runs_to_completion(recorded)
