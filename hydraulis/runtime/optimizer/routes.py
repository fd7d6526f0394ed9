"""Gradients from a compute layout into the optimizer layout, weights back out: one route per
(strategy, rank), two all-to-all exchanges per step, described by ranges.

Under a strategy, rank ``r`` holds the shards of its stage (:func:`~hydraulis.sharding.parameters.stage_shards`,
nothing when the strategy leaves it idle) and owns a buffer of the optimizer layout
(:mod:`.placement`). Both are regions of parameters, and what a shard and a buffer share is a
few strided blocks (:func:`~hydraulis.sharding.ranges.overlap`). A :class:`RoutePlan`
lists them, built once per strategy from the layouts alone — no communication, no per-element
array:

The details: :func:`route_plan`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from hydraulis.runtime.rank_map import RankMap, RankPlace
from hydraulis.sharding.buckets import shard_buckets
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import ParameterSpec, Shard, held, holding_stage, shard_of, stage_shards
from hydraulis.sharding.ranges import Region, overlap, strided

HELD = ("peer", "parameter", "offset", "shard", "count", "length", "stride", "contributes", "bucket")
"""Columns of :attr:`RoutePlan.held` (``offset``: in the shard's own tensor)."""
OWNED = ("peer", "parameter", "source_offset", "offset", "count", "length", "stride", "contributes", "bucket")
"""Columns of :attr:`RoutePlan.owned` (``offset``: in the buffer; ``source_offset``: in the
peer's shard, the order both sides agree on)."""


@dataclass(frozen=True)
class RoutePlan:
    """One rank's blocks under one strategy (:func:`route_plan`): ``held`` and ``owned`` are
    int64 tables with the columns :data:`HELD` and :data:`OWNED`, rows in exchange order."""

    rank: int
    world_size: int
    shards: tuple[Shard, ...]
    held: np.ndarray
    owned: np.ndarray
    buckets: int = 1
    """``K``: the exchanges per step, the most buckets any holder of the strategy cuts."""
    shard_buckets: tuple[int, ...] = ()
    """The bucket of each of :attr:`shards`."""

    @property
    def local(self) -> bool:
        """Every block this rank sends or receives is its own (:func:`route_plan`: one owner)."""
        return bool((self.held[:, 0] == self.rank).all() and (self.owned[:, 0] == self.rank).all())

    @property
    def nbytes(self) -> int:
        """Bytes of the plan's tables and of the exchange's per-peer counts (4 × world)."""
        return int(self.held.nbytes + self.owned.nbytes) + 4 * 8 * self.world_size

    def sent(self, reduce: bool, bucket: int) -> list[int]:
        """Elements this rank's shards send to each rank in ``bucket`` (reduce: contributing shards only)."""
        return _counts(self.held, HELD, self.world_size, reduce, bucket)

    def received(self, reduce: bool, bucket: int) -> list[int]:
        """Elements this rank's buffer receives from each rank in ``bucket`` (reduce: contributions only)."""
        return _counts(self.owned, OWNED, self.world_size, reduce, bucket)


def route_plan(placement: OptimizerOwnership, rank_map: RankMap, rank: int,
               bucket_elements: tuple[int, int] | None = None) -> RoutePlan:
    """The blocks of ``rank`` under the strategy of ``rank_map`` (:func:`route_plan`), in buckets
    of ``bucket_elements`` ``(capacity, first)`` elements (None: one bucket per rank).

    * **held**: for each shard ``k`` of ``r`` and each owner ``o`` of a part of its parameter,
      the blocks (offset in the shard, count, length, stride);
    * **owned**: for each region of ``r``'s buffer and each rank ``h`` holding a shard of its
      parameter (every pipeline, tp rank and cp rank), the blocks (offset in the buffer, …).

    Each holder's shard is cut by the tp of the stage holding the parameter, so pipelines of
    different tp, and stages of one staged pipeline with different tp (design §9.2), meet the
    optimizer layout alike.

    **Buckets.** Every block carries the bucket of the holder's shard (:mod:`hydraulis.sharding.buckets`:
    the holder's shards in reverse order of use, cut by size), and each exchange is one
    ``all_to_all_single`` per bucket, ``K`` of them per step, so a bucket's exchange can start
    as soon as the backward has produced it and a bucket's weights be waited for where the forward
    needs them (:mod:`.exchange`). Every holder numbers its buckets from 0 in the order its
    backward produces them, so the ``k``-th all-to-all carries bucket ``k`` of every holder; ``K``
    is the most buckets any holder cuts, and a holder with fewer sends nothing in the rest. Both
    sides order a bucket's blocks by (peer, parameter, offset in the shard), so a sender packs and
    a receiver unpacks the same sequence. A shard that only repeats tp rank 0's identical gradient
    (:attr:`~hydraulis.sharding.parameters.Shard.contributes`, the RMSNorm weights) is left
    out of the reduction and still receives weights.

    **Reduce** (every step, after the backward passes): rank ``r`` packs its shards' gradients
    (fp32) block by block, peer by peer, and sends them with one ``all_to_all_single``; each owner
    zeroes its gradient buffer and adds the incoming blocks bucket by bucket, source by source in
    rank order (one source never sends an element twice, so each source's adds are disjoint and the
    sum is deterministic on every device). The buffer then holds, for each element, the sum over every
    pipeline, cp rank, tp rank and micro-batch that computed it — the single-device gradient up to
    the order of the sums (:mod:`..model.loss` normalises by the whole batch). A reduce-scatter in
    effect, for any mix of layouts.

    **Propagate** (every step, before the forward passes, for the step's strategy): the reverse
    exchange — each owner packs its blocks of ``θ`` in the compute dtype and sends them; rank ``r``
    copies what it receives into its shards. A strategy switch between steps is therefore just
    another route: no restart, no full copy of the model anywhere.

    **One owner, no exchange.** Where every rank owns exactly the elements it holds — a one-device
    job; any strategy whose data-parallel group of every rank is the rank itself and whose optimizer
    layout puts each rank's buffer on its own shards — every block's peer is the rank itself
    (:attr:`RoutePlan.local`) and both exchanges are copies between the rank's own tensors:
    :meth:`Route.gather_local` copies the accumulated gradients into the buffer and
    :meth:`Route.propagate_local` the updated weights into the compute shards, block by block, with
    no packed buffer, no all-to-all and nothing in flight. The ranks agree on it when the route is
    checked (one all-reduce): the all-to-alls are collective, so either every rank exchanges or none
    does.

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
    place = rank_map.place(rank)
    cut = _BucketCut(placement, rank_map, bucket_elements)
    shards = () if place is None else cut.shards(place)
    mine = tuple(cut.buckets(place)[shard.name] for shard in shards)
    index = {spec.name: i for i, spec in enumerate(placement.specs)}
    held = []
    for k, shard in enumerate(shards):
        region_k = Region.of_shard(shard)
        for owner, region in placement.owner_regions(shard.spec):
            held += [(owner, index[shard.name], block.a, k, block.count, block.length, block.a_stride,
                      shard.contributes, mine[k]) for block in overlap(region_k, region)]
    owned = []
    for region in placement.owned_regions(rank):
        for holders, shard in _holders(rank_map, region.spec):
            blocks = overlap(Region.of_shard(shard), region)
            owned += [(holder, index[region.spec.name], block.a, block.b, block.count, block.length, block.b_stride,
                       shard.contributes, cut.bucket_of(holder, shard.name))
                      for holder in holders for block in blocks]
    return RoutePlan(rank, rank_map.world_size, shards, _table(held, HELD), _table(owned, OWNED), cut.most(), mine)


class _BucketCut:
    """Every holder's buckets under one strategy (:func:`route_plan`): the cut of its shards
    (:func:`~hydraulis.sharding.buckets.shard_buckets`; one bucket without ``elements``), computed
    once per (pipeline, stage, tp rank)."""

    def __init__(self, placement: OptimizerOwnership, rank_map: RankMap, elements: tuple[int, int] | None) -> None:
        self.placement, self.rank_map, self.elements = placement, rank_map, elements
        self.cache: dict[tuple[int, int, int], dict[str, int]] = {}

    def shards(self, place: RankPlace) -> tuple[Shard, ...]:
        return stage_shards(self.placement.model, self.rank_map.pipelines[place.pipeline], place.stage, place.tp_rank)

    def buckets(self, place: RankPlace) -> dict[str, int]:
        """The bucket of each shard of ``place``, by name."""
        key = (place.pipeline, place.stage, place.tp_rank)
        if key not in self.cache:
            shards = self.shards(place)
            cut = shard_buckets(shards, *self.elements) if self.elements else (0,) * len(shards)
            self.cache[key] = {shard.name: bucket for shard, bucket in zip(shards, cut)}
        return self.cache[key]

    def bucket_of(self, rank: int, name: str) -> int:
        return self.buckets(self.rank_map.place(rank))[name]

    def most(self) -> int:
        """``K``: the most buckets any holder cuts (at least 1)."""
        if not self.elements:
            return 1
        places = (p for p in map(self.rank_map.place, range(self.rank_map.world_size)) if p is not None)
        return 1 + max((max(self.buckets(p).values(), default=0) for p in places), default=0)


class Route:
    """A :class:`RoutePlan` run over the group ``world`` (every rank; :func:`route_plan`). Each
    bucket's exchange is a pack, one all-to-all and an unpack; the parts are methods of their own
    (:mod:`.exchange` runs them asynchronously)."""

    def __init__(self, plan: RoutePlan, world) -> None:
        self.plan, self.world, self.shards, self.buckets = plan, world, plan.shards, plan.buckets
        self.sent = {reduce: [plan.sent(reduce, k) for k in range(plan.buckets)] for reduce in (True, False)}
        self.received = {reduce: [plan.received(reduce, k) for k in range(plan.buckets)] for reduce in (True, False)}
        held = plan.held[:, [0, 3, 2, 4, 5, 6, 7]].tolist()
        owned = plan.owned[:, [0, 3, 4, 5, 6, 7]].tolist()
        self.held_rows = [[r for r, b in zip(held, plan.held[:, -1]) if b == k] for k in range(plan.buckets)]
        """Per bucket, ``(peer, shard, offset, count, length, stride, contributes)`` in exchange order."""
        self.owned_rows = [[r for r, b in zip(owned, plan.owned[:, -1]) if b == k] for k in range(plan.buckets)]
        """Per bucket, ``(peer, offset, count, length, stride, contributes)`` in exchange order."""
        self.local = False
        """Every rank's plan is local (:meth:`check` finds it out): no exchange runs."""

    def check(self, device: torch.device) -> None:
        """Raise unless every peer's plan sends this rank what its own plan expects (one
        all-to-all of the counts, when the route is built)."""
        size = self.world.size
        mine = torch.tensor(self.sent[False], device=device).t().contiguous()
        told = self.world.all_to_all(mine, [1] * size, [1] * size).cpu()
        expected = torch.tensor(self.received[False]).t()
        if told.shape != expected.shape or not torch.equal(told, expected):
            raise RuntimeError(f"rank {self.plan.rank}: its peers' routes send {told.tolist()} elements per bucket, "
                               f"its own expects {expected.tolist()}; the ranks disagree on the strategy")
        local = torch.tensor([int(self.plan.local)], device=device)
        self.local = bool(self.world.all_reduce(local, dist.ReduceOp.MIN).item())

    def gather_local(self, grads: list, into: torch.Tensor) -> None:
        """One owner (:func:`route_plan`): ``into`` ← this rank's own gradient blocks (``grads[k]``
        None: zeros), copied in place — the reduction without buffers or all-to-all."""
        targets, sources, missing = [], [], False
        for block, owned in self._own_blocks(reduce=True):
            _, k, offset, count, length, stride, _ = block
            if grads[k] is None:
                missing = True
                continue
            targets.append(strided(into, owned[1], count, length, owned[4]))
            sources.append(strided(grads[k].reshape(-1), offset, count, length, stride))
        if missing or len(targets) < sum(len(rows) for rows in self.owned_rows):
            into.zero_()
        if targets:
            torch._foreach_copy_(targets, sources)

    def propagate_local(self, master: torch.Tensor, params: list) -> None:
        """One owner (:func:`route_plan`): every shard's blocks ← ``master``'s, cast to the shard's
        dtype — the propagation without buffers or all-to-all."""
        targets, sources = [], []
        for block, owned in self._own_blocks(reduce=False):
            _, k, offset, count, length, stride, _ = block
            targets.append(strided(params[k].data.view(-1), offset, count, length, stride))
            sources.append(strided(master, owned[1], count, length, owned[4]))
        if targets:
            torch._foreach_copy_(targets, sources)

    def aliases(self, into: torch.Tensor) -> list[torch.Tensor] | None:
        """One owner: each shard as a view of ``into`` (its run of the buffer, its shape), or None
        unless every shard is one contiguous run (then :meth:`gather_local` copies instead)."""
        runs: dict[int, list] = {}
        for block, owned in self._own_blocks(reduce=False):
            runs.setdefault(block[1], []).append((block, owned))
        views = []
        for k, shard in enumerate(self.shards):
            blocks = runs.get(k, [])
            if len(blocks) != 1:
                return None
            (_, _, offset, count, length, stride, _), (_, start, _, _, owned_stride, _) = blocks[0]
            numel = math.prod(shard.shape)
            whole = offset == 0 and count * length == numel
            if not (whole and (count == 1 or stride == owned_stride == length)):
                return None
            views.append(into[start:start + numel].view(shard.shape))
        return views

    def _own_blocks(self, reduce: bool):
        """Each held block beside the owned block it meets (both sides list them in one order);
        ``reduce``: contributing blocks only."""
        for bucket in range(self.buckets):
            held = [r for r in self.held_rows[bucket] if r[6] or not reduce]
            owned = [r for r in self.owned_rows[bucket] if r[5] or not reduce]
            yield from zip(held, owned, strict=True)

    def pack_gradients(self, grads: list, device: torch.device, bucket: int) -> torch.Tensor:
        """The contributing shards' gradient blocks of ``bucket`` in exchange order, fp32
        (``grads[k]`` None: zeros)."""
        outgoing = torch.empty(sum(self.sent[True][bucket]), dtype=torch.float32, device=device)
        targets, sources, start = [], [], 0
        for _, k, offset, count, length, stride, contributes in self.held_rows[bucket]:
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

    def add_received(self, incoming: torch.Tensor, into: torch.Tensor, bucket: int) -> None:
        """``into`` += every source's blocks of ``bucket``, source by source in rank order (the
        caller zeroes ``into`` before the first bucket)."""
        start = 0
        for blocks in _by_peer(self.owned_rows[bucket], reduce=True):
            views, parts = [], []
            for offset, count, length, stride in blocks:
                views.append(strided(into, offset, count, length, stride))
                parts.append(incoming[start:start + count * length].view(count, length))
                start += count * length
            torch._foreach_add_(views, parts)

    def pack_weights(self, master: torch.Tensor, dtype: torch.dtype, bucket: int) -> torch.Tensor:
        """Every holder's blocks of ``master`` in ``bucket``, in exchange order, in ``dtype``."""
        outgoing = torch.empty(sum(self.received[False][bucket]), dtype=dtype, device=master.device)
        targets, sources, start = [], [], 0
        for _, offset, count, length, stride, _ in self.owned_rows[bucket]:
            targets.append(outgoing[start:start + count * length].view(count, length))
            sources.append(strided(master, offset, count, length, stride))
            start += count * length
        if targets:
            torch._foreach_copy_(targets, sources)
        return outgoing

    def copy_received(self, incoming: torch.Tensor, params: list, bucket: int) -> None:
        """The received weight blocks of ``bucket`` into this rank's shard tensors."""
        targets, sources, start = [], [], 0
        for _, k, offset, count, length, stride, _ in self.held_rows[bucket]:
            targets.append(strided(params[k].data.view(-1), offset, count, length, stride))
            sources.append(incoming[start:start + count * length].view(count, length))
            start += count * length
        if targets:
            torch._foreach_copy_(targets, sources)


def _holders(rank_map: RankMap, spec: ParameterSpec) -> list[tuple[list[int], Shard]]:
    """Every rank holding a shard of ``spec`` under ``rank_map``, grouped by the shard they hold."""
    groups: dict[Shard, list[int]] = {}
    for p, layout in enumerate(rank_map.pipelines):
        scheme, stage = layout.scheme, holding_stage(spec, layout)
        for c in range(scheme.cp):
            for t in filter(lambda t: held(spec, scheme, t), range(scheme.stage_tp(stage))):
                groups.setdefault(shard_of(spec, scheme, stage, t), []).append(rank_map.rank(RankPlace(p, stage, c, t)))
    return [(ranks, shard) for shard, ranks in groups.items()]


def _table(rows: list[tuple], columns: tuple[str, ...]) -> np.ndarray:
    table = np.array(rows, dtype=np.int64).reshape(-1, len(columns))
    return table[np.lexsort((table[:, 2], table[:, 1], table[:, 0], table[:, -1]))] if len(table) else table


def _counts(table: np.ndarray, columns: tuple[str, ...], world_size: int, reduce: bool, bucket: int) -> list[int]:
    rows = table[table[:, -1] == bucket]
    rows = rows[rows[:, columns.index("contributes")] == 1] if reduce else rows
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
