"""Where every parameter element lives in the optimizer layout.

The optimizer layout ``(dp_o, tp_o, pp_o)`` (design §2, §9) holds the fp32 master weights and
Adam moments once, sharded, whatever strategy computes a step. Its ranks are laid out like a
homogeneous strategy (tp fastest, then dp, then the stage, Megatron-LM's order)::

    owner rank = (s·dp_o + d)·tp_o + t        s < pp_o, d < dp_o, t < tp_o

The details: :class:`OptimizerOwnership`."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from hydraulis.base.stages import even_split
from hydraulis.base.types import ModelSpec, OptimizerLayout
from hydraulis.sharding.parameters import Holder, ParameterSpec, parameter_specs, unit_range
from hydraulis.sharding.ranges import Region


@dataclass(frozen=True)
class OwnerPosition:
    """An owner rank's stage, dp rank and tp rank in the optimizer layout."""

    stage: int
    dp_rank: int
    tp_rank: int


@dataclass(frozen=True)
class _Slice:
    """The tp slice a tp rank owns of ``spec`` (a whole :class:`Region`), at ``offset`` in the
    stage's flattening."""

    region: Region
    offset: int

    @property
    def numel(self) -> int:
        return self.region.hi


class OptimizerOwnership:
    """The optimizer layout ``layout`` of ``model`` on a world of ``world_size`` ranks.

    Ranks from ``dp_o·tp_o·pp_o`` on (when the layout is smaller than the world; its size must
    divide the world) own nothing. Rank ``(s, d, t)`` owns:

    1. **stage** ``s``: the parameters of the layers of the even split of ``L`` layers into
       ``pp_o`` stages (:func:`~hydraulis.base.stages.even_split`), the embedding on stage 0, the
       final norm and the head on the last;
    2. **tp slice** ``t``: of each such parameter, the tensor-parallel slice of
       :mod:`hydraulis.sharding.parameters` — except that every element has exactly one owner: a
       parameter without a tp dimension (RMSNorm weights) belongs to ``t = 0`` — a mixture of
       experts' routed expert ``j``, held whole, to ``t = j mod tp_o``, so the experts' states
       spread over the tp ranks as over their dp chunks —, and a kv head that ``tp_o/U`` ranks would
       share (``U`` heads < ``tp_o``) to the first of them;
    3. **dp chunk** ``d`` (ZeRO-1): the stage's tp slices of rank ``t``, flattened and
       concatenated in canonical order, ``Q`` elements, are cut into ``dp_o`` contiguous chunks
       ``[⌊d·Q/dp_o⌋, ⌊(d+1)·Q/dp_o⌋)``; the chunk is the rank's **buffer** (master weights,
       gradient and moments are flat tensors of its length).

    So every element of every parameter has exactly one owner and one position in its buffer, and
    the buffers hold ``≈ P/(dp_o·tp_o·pp_o)`` elements each. Worked example, ``tiny`` (L = 4,
    H = 64, V = 1024, P = 315,968) under ``dp2·tp1·pp2`` on 4 ranks: stage 0 holds the embedding and
    layers 0–1 (65,536 + 2·46,208 = 157,952 elements), rank 0 the first 78,976 of them, rank 1 the
    rest; ranks 2 and 3 split layers 2–3, the final norm and the head (158,016 elements) into
    79,008 each.

    An owner's part of one parameter is a :class:`~hydraulis.sharding.ranges.Region` (its tp
    slice cut to its dp chunk): :meth:`OptimizerOwnership.owned_regions` lists a buffer's regions,
    :meth:`OptimizerOwnership.owner_regions` every owner's region of one parameter — ``O(tp_o + chunks
    crossed)`` entries, never one per element. Maps to other holders (compute shards, another
    layout's buffers, canonical tensors) are their regions' overlaps (:mod:`.ranges`).
    """

    def __init__(self, model: ModelSpec, layout: OptimizerLayout, world_size: int) -> None:
        layout.check(model, world_size)
        self.model, self.layout, self.world_size = model, layout, world_size
        self.specs = parameter_specs(model)
        split = even_split(model.layers, layout.pp)
        self._stage_layers = [range(sum(split[:s]), sum(split[:s + 1])) for s in range(layout.pp)]
        self._slices: dict[tuple[int, int], dict[str, _Slice]] = {}
        self._bounds: dict[tuple[int, int], list[int]] = {}
        self._owners: dict[str, tuple[tuple[int, Region], ...]] = {}
        for stage in range(layout.pp):
            for tp_rank in range(layout.tp):
                slices, offset = {}, 0
                for spec in self.specs:
                    if self.stage_of(spec) == stage:
                        owned = self._owned_slice(spec, tp_rank)
                        if owned is not None:
                            slices[spec.name] = _Slice(owned, offset)
                            offset += owned.hi
                self._slices[stage, tp_rank] = slices
                self._bounds[stage, tp_rank] = [d * offset // layout.dp for d in range(layout.dp + 1)]

    @property
    def owners(self) -> int:
        """Ranks that own a buffer: ``dp_o·tp_o·pp_o``."""
        return self.layout.devices

    def stage_of(self, spec: ParameterSpec) -> int:
        if spec.holder is Holder.EMBEDDING:
            return 0
        if spec.holder is Holder.OUTPUT:
            return self.layout.pp - 1
        return next(s for s, layers in enumerate(self._stage_layers) if spec.layer in layers)

    def rank(self, place: OwnerPosition) -> int:
        return (place.stage * self.layout.dp + place.dp_rank) * self.layout.tp + place.tp_rank

    def place(self, rank: int) -> OwnerPosition | None:
        """The owner place of ``rank``, None when it owns nothing."""
        if rank >= self.owners:
            return None
        within, tp_rank = divmod(rank, self.layout.tp)
        stage, dp_rank = divmod(within, self.layout.dp)
        return OwnerPosition(stage, dp_rank, tp_rank)

    def buffer_size(self, rank: int) -> int:
        place = self.place(rank)
        if place is None:
            return 0
        start, stop = self._chunk(place)
        return stop - start

    def owned_regions(self, rank: int) -> tuple[Region, ...]:
        """The regions of ``rank``'s buffer, in buffer order (empty when it owns nothing)."""
        place = self.place(rank)
        if place is None:
            return ()
        start, stop = self._chunk(place)
        regions = []
        for owned in self._slices[place.stage, place.tp_rank].values():
            region = _cut(owned, start, stop)
            if region is not None:
                regions.append(region)
        return tuple(regions)

    def owner_regions(self, spec: ParameterSpec) -> tuple[tuple[int, Region], ...]:
        """``(owner rank, its region)`` for every owner of a part of ``spec``."""
        if spec.name not in self._owners:
            stage, regions = self.stage_of(spec), []
            for tp_rank in range(self.layout.tp):
                owned = self._slices[stage, tp_rank].get(spec.name)
                if owned is None:
                    continue
                bounds = self._bounds[stage, tp_rank]
                dp_rank = bisect_right(bounds, owned.offset) - 1
                while dp_rank < self.layout.dp and bounds[dp_rank] < owned.offset + owned.numel:
                    region = _cut(owned, bounds[dp_rank], bounds[dp_rank + 1])
                    if region is not None:
                        regions.append((self.rank(OwnerPosition(stage, dp_rank, tp_rank)), region))
                    dp_rank += 1
            self._owners[spec.name] = tuple(regions)
        return self._owners[spec.name]

    def _owned_slice(self, spec: ParameterSpec, tp_rank: int) -> Region | None:
        if spec.tp_dim is None:
            owner = 0 if spec.expert is None else spec.expert % self.layout.tp
            return Region.whole(spec) if tp_rank == owner else None
        units, tp = spec.units, self.layout.tp
        if units < tp and tp_rank % (tp // units):
            return None
        first, count = unit_range(units, tp, tp_rank)
        return Region.slice(spec, first * spec.unit, count * spec.unit)

    def _chunk(self, place: OwnerPosition) -> tuple[int, int]:
        bounds = self._bounds[place.stage, place.tp_rank]
        return bounds[place.dp_rank], bounds[place.dp_rank + 1]


def _cut(owned: _Slice, start: int, stop: int) -> Region | None:
    """The part of ``owned`` in the stage-flat chunk ``[start, stop)``, positioned in the chunk."""
    lo, hi = max(0, start - owned.offset), min(owned.numel, stop - owned.offset)
    if lo >= hi:
        return None
    region = owned.region
    return Region(region.spec, region.start, region.length, lo, hi, owned.offset - start)
