"""Gradients from a compute layout into the optimizer layout, weights back out: one route per
(strategy, rank), two all-to-all exchanges per step, described by ranges.

Under a strategy, rank ``r`` holds the shards of its stage (:func:`~hydraulis.layout.sharding.stage_shards`,
nothing when the strategy leaves it idle) and owns a buffer of the optimizer layout
(:mod:`.placement`). Both are regions of parameters, and what a shard and a buffer share is a
few strided blocks (:func:`~hydraulis.layout.ranges.overlap`). A :class:`RoutePlan`
lists them, built once per strategy from the layouts alone — no communication, no per-element
array:

* **held**: for each shard ``k`` of ``r`` and each owner ``o`` of a part of its parameter,
  the blocks (offset in the shard, count, length, stride);
* **owned**: for each region of ``r``'s buffer and each rank ``h`` holding a shard of its
  parameter (every pipeline, tp rank and cp rank), the blocks (offset in the buffer, …).

Each holder's shard is cut by the tp of the stage holding the parameter, so pipelines of
different tp, and stages of one staged pipeline with different tp (design §18), meet the
optimizer layout alike.

Both sides order a peer's blocks by (parameter, offset in the shard), so a sender packs and a
receiver unpacks the same sequence. A shard that only repeats tp rank 0's identical gradient
(:attr:`~hydraulis.layout.sharding.Shard.contributes`, the RMSNorm weights) is left
out of the reduction and still receives weights.

**Reduce** (every step, after the backward passes): rank ``r`` packs its shards' gradients
(fp32) block by block, peer by peer, and sends them with one ``all_to_all_single``; each owner
zeroes its gradient buffer and adds the incoming blocks source by source, in rank order (one
source never sends an element twice, so each source's adds are disjoint and the sum is
deterministic on every device). The buffer then holds, for each element, the sum over every
pipeline, cp rank, tp rank and micro-batch that computed it — the single-device gradient up to
the order of the sums (:mod:`..model.loss` normalises by the whole batch). A reduce-scatter in
effect, for any mix of layouts.

**Propagate** (every step, before the forward passes, for the step's strategy): the reverse
exchange — each owner packs its blocks of ``θ`` in the compute dtype and sends them; rank ``r``
copies what it receives into its shards. A strategy switch between steps is therefore just
another route: no restart, no full copy of the model anywhere.

**Size of a route**: ``O(shards × owners crossed + regions × holders)`` blocks of 7 integers.
Each (shard, owner region) pair shares at most nine blocks (:mod:`.ranges`); in practice one
(parameters cut along rows) or one strided block per dp-chunk boundary crossed (along
columns). Worked example, Llama-7B under ``1,8,1x8`` on 64 ranks with the optimizer layout
``64,1,1``: a rank's 291 shards meet ≈ 2 owners each, its buffer of ``P/64`` elements ≈ 3
parameters × 8 pipelines × 8 tp ranks — a few thousand blocks, tens of kilobytes, where one
int64 per element held and owned took ``8·(P/8 + P/64) ≈ 7.6 GB``.

**Communication volume per step.** Let ``h(x)`` be the number of ranks that hold element ``x``
under the step's strategy (``Σ_pipelines cp`` for a parameter every pipeline shards by tp; × tp
for the norm weights, replicated over tp). Rank ``r`` sends its ``n_r`` contributed gradient
values and receives ``Σ_{x owned by r} h(x)`` (norm weights once per pipeline and cp rank), then
the reverse for the weights; summed over ranks both directions move ``≈ Σ_x h(x)`` values.
With 4-byte gradients and ``b``-byte weights (4 fp32, 2 bf16)::

    per rank  ≈ (4 + b) · P · h / N     bytes sent and the same received   (h = mean h(x))

minus the part a rank owns itself. For a homogeneous strategy of ``d`` pipelines of
``(cp, tp, pp)`` on ``N = d·cp·tp·pp`` ranks, ``h = d·cp`` and this is ``(4 + b)·P/(tp·pp)`` —
the bytes of a ring reduce-scatter of the ``P/(tp·pp)`` gradients of a rank's shard over its
``d·cp`` replicas plus the all-gather of its updated weights (ZeRO-1), up to the ring's
``(d·cp − 1)/(d·cp)``. Worked example, ``tiny`` (P = 315,968) on 4 ranks under ``1,2,1+1,1,2``
(h = 2 for almost every element) in fp32: ``8·315,968·2/4 ≈ 1.26 MB`` per rank per step each way,
where the canonical all-reduce it replaces moved ``2·¾·4·P ≈ 1.9 MB``. The exchange is
point-to-point (every rank talks to the ranks it shares elements with), so its latency grows
with the number of partners rather than ``log N``. Its buffers (the packed blocks, sent and
received) exist only during the exchange.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from hydraulis.layout.optimizer_placement import OptimizerPlacement
from hydraulis.layout.ranges import Region, overlap, strided
from hydraulis.layout.sharding import ParameterSpec, Shard, holding_stage, shard_of, stage_shards
from hydraulis.runtime.rank_map import RankMap, RankPlace

HELD = ("peer", "parameter", "offset", "shard", "count", "length", "stride", "contributes")
"""Columns of :attr:`RoutePlan.held` (``offset``: in the shard's own tensor)."""
OWNED = ("peer", "parameter", "source_offset", "offset", "count", "length", "stride", "contributes")
"""Columns of :attr:`RoutePlan.owned` (``offset``: in the buffer; ``source_offset``: in the
peer's shard, the order both sides agree on)."""


@dataclass(frozen=True)
class RoutePlan:
    """One rank's blocks under one strategy (module docstring): ``held`` and ``owned`` are
    int64 tables with the columns :data:`HELD` and :data:`OWNED`, rows in exchange order."""

    rank: int
    world_size: int
    shards: tuple[Shard, ...]
    held: np.ndarray
    owned: np.ndarray

    @property
    def nbytes(self) -> int:
        """Bytes of the plan's tables and of the exchange's per-peer counts (4 × world)."""
        return int(self.held.nbytes + self.owned.nbytes) + 4 * 8 * self.world_size

    def sent(self, reduce: bool) -> list[int]:
        """Elements this rank's shards send to each rank (reduce: contributing shards only)."""
        return _counts(self.held, HELD, self.world_size, reduce)

    def received(self, reduce: bool) -> list[int]:
        """Elements this rank's buffer receives from each rank (reduce: contributions only)."""
        return _counts(self.owned, OWNED, self.world_size, reduce)


def route_plan(placement: OptimizerPlacement, rank_map: RankMap, rank: int) -> RoutePlan:
    """The blocks of ``rank`` under the strategy of ``rank_map`` (module docstring)."""
    place = rank_map.place(rank)
    shards = () if place is None else stage_shards(placement.model, rank_map.pipelines[place.pipeline], place.stage,
                                                   place.tp_rank)
    index = {spec.name: i for i, spec in enumerate(placement.specs)}
    held = []
    for k, shard in enumerate(shards):
        mine = Region.of_shard(shard)
        for owner, region in placement.owner_regions(shard.spec):
            held += [(owner, index[shard.name], block.a, k, block.count, block.length, block.a_stride,
                      shard.contributes) for block in overlap(mine, region)]
    owned = []
    for region in placement.owned_regions(rank):
        for holders, shard in _holders(rank_map, region.spec):
            blocks = overlap(Region.of_shard(shard), region)
            owned += [(holder, index[region.spec.name], block.a, block.b, block.count, block.length, block.b_stride,
                       shard.contributes) for holder in holders for block in blocks]
    return RoutePlan(rank, rank_map.world_size, shards, _table(held, HELD), _table(owned, OWNED))


class Route:
    """A :class:`RoutePlan` run over the world group ``world`` (module docstring). Each
    exchange is a pack, one all-to-all and an unpack; the four parts are methods of their own."""

    def __init__(self, plan: RoutePlan, world) -> None:
        self.plan, self.world, self.shards = plan, world, plan.shards
        self.sent = {reduce: plan.sent(reduce) for reduce in (True, False)}
        self.received = {reduce: plan.received(reduce) for reduce in (True, False)}

    def check(self, device: torch.device) -> None:
        """Raise unless every peer's plan sends this rank what its own plan expects (one
        all-to-all of the counts, when the route is built)."""
        size = self.world.size
        told = self.world.all_to_all(torch.tensor(self.sent[False], device=device), [1] * size, [1] * size)
        if told.cpu().tolist() != self.received[False]:
            raise RuntimeError(f"rank {self.plan.rank}: its peers' routes send {told.cpu().tolist()} elements, "
                               f"its own expects {self.received[False]}; the ranks disagree on the strategy")

    def reduce(self, grads: list, into: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        """``into`` (the owner's gradient buffer) ← the sum of every holder's gradient; ``grads``
        are this rank's shard gradients in shard order (None: no contribution, zeros), sent in
        ``dtype`` (:mod:`hydraulis.runtime.gradients`) and summed in fp32."""
        outgoing = self.pack_gradients(grads, into.device).to(dtype)
        incoming = self.world.all_to_all(outgoing, self.received[True], self.sent[True])
        self.add_received(incoming.to(torch.float32), into)

    def propagate(self, master: torch.Tensor, params: list) -> None:
        """Copy the owners' ``master`` values of this rank's elements into ``params`` (its shards'
        tensors in shard order, any dtype)."""
        dtype = params[0].dtype if params else master.dtype
        outgoing = self.pack_weights(master, dtype)
        self.copy_received(self.world.all_to_all(outgoing, self.sent[False], self.received[False]), params)

    def pack_gradients(self, grads: list, device: torch.device) -> torch.Tensor:
        """The contributing shards' gradient blocks in exchange order, fp32."""
        outgoing = torch.empty(sum(self.sent[True]), dtype=torch.float32, device=device)
        targets, sources, start = [], [], 0
        for _, k, offset, count, length, stride, contributes in self._held_rows():
            if not contributes:
                continue
            target = outgoing[start:start + count * length].view(count, length)
            start += count * length
            if grads[k] is None:
                target.zero_()
            else:
                targets.append(target)
                sources.append(strided(grads[k].reshape(-1), offset, count, length, stride))
        if targets:
            torch._foreach_copy_(targets, sources)
        return outgoing

    def add_received(self, incoming: torch.Tensor, into: torch.Tensor) -> None:
        """``into`` ← 0, then every source's blocks added, source by source in rank order."""
        into.zero_()
        start = 0
        for blocks in _by_peer(self._owned_rows(), reduce=True):
            views, parts = [], []
            for offset, count, length, stride in blocks:
                views.append(strided(into, offset, count, length, stride))
                parts.append(incoming[start:start + count * length].view(count, length))
                start += count * length
            torch._foreach_add_(views, parts)

    def pack_weights(self, master: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Every holder's blocks of ``master`` in exchange order, in ``dtype``."""
        outgoing = torch.empty(sum(self.received[False]), dtype=dtype, device=master.device)
        targets, sources, start = [], [], 0
        for _, offset, count, length, stride, _ in self._owned_rows():
            targets.append(outgoing[start:start + count * length].view(count, length))
            sources.append(strided(master, offset, count, length, stride))
            start += count * length
        if targets:
            torch._foreach_copy_(targets, sources)
        return outgoing

    def copy_received(self, incoming: torch.Tensor, params: list) -> None:
        """The received weight blocks into this rank's shard tensors."""
        targets, sources, start = [], [], 0
        for _, k, offset, count, length, stride, _ in self._held_rows():
            targets.append(strided(params[k].data.view(-1), offset, count, length, stride))
            sources.append(incoming[start:start + count * length].view(count, length))
            start += count * length
        if targets:
            torch._foreach_copy_(targets, sources)

    def _held_rows(self) -> list[list[int]]:
        """``(peer, shard, offset, count, length, stride, contributes)`` in exchange order."""
        return self.plan.held[:, [0, 3, 2, 4, 5, 6, 7]].tolist()

    def _owned_rows(self) -> list[list[int]]:
        """``(peer, offset, count, length, stride, contributes)`` in exchange order."""
        return self.plan.owned[:, [0, 3, 4, 5, 6, 7]].tolist()


def _holders(rank_map: RankMap, spec: ParameterSpec) -> list[tuple[list[int], Shard]]:
    """Every rank holding a shard of ``spec`` under ``rank_map``, grouped by the shard they hold."""
    groups: dict[Shard, list[int]] = {}
    for p, layout in enumerate(rank_map.pipelines):
        scheme, stage = layout.scheme, holding_stage(spec, layout)
        for c in range(scheme.cp):
            for t in range(scheme.stage_tp(stage)):
                groups.setdefault(shard_of(spec, scheme, stage, t), []).append(rank_map.rank(RankPlace(p, stage, c, t)))
    return [(ranks, shard) for shard, ranks in groups.items()]


def _table(rows: list[tuple], columns: tuple[str, ...]) -> np.ndarray:
    table = np.array(rows, dtype=np.int64).reshape(-1, len(columns))
    return table[np.lexsort((table[:, 2], table[:, 1], table[:, 0]))] if len(table) else table


def _counts(table: np.ndarray, columns: tuple[str, ...], world_size: int, reduce: bool) -> list[int]:
    rows = table[table[:, columns.index("contributes")] == 1] if reduce else table
    sizes = rows[:, columns.index("count")] * rows[:, columns.index("length")]
    return np.bincount(rows[:, 0], weights=sizes, minlength=world_size).astype(np.int64).tolist()


def _by_peer(rows: list[list[int]], reduce: bool):
    """The owned blocks ``(offset, count, length, stride)`` grouped by peer, in peer order."""
    peer, group = None, []
    for row in rows:
        if reduce and not row[5]:
            continue
        if row[0] != peer and group:
            yield group
            group = []
        peer = row[0]
        group.append(row[1:5])
    if group:
        yield group
