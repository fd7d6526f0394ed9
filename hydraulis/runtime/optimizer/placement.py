"""Where every parameter element lives: in the optimizer layout and in a compute shard.

The optimizer layout ``(dp_o, tp_o, pp_o)`` (design §2, §7) holds the fp32 master weights and
Adam moments once, sharded, whatever strategy computes a step. Its ranks are laid out like a
homogeneous strategy (tp fastest, then dp, then the stage, Megatron-LM's order)::

    owner rank = (s·dp_o + d)·tp_o + t        s < pp_o, d < dp_o, t < tp_o

Ranks from ``dp_o·tp_o·pp_o`` on (when the layout is smaller than the world; its size must
divide the world) own nothing. Rank ``(s, d, t)`` owns:

1. **stage** ``s``: the parameters of the layers of the even split of ``L`` layers into
   ``pp_o`` stages (:func:`~hydraulis.runtime.layout.even_split`), the embedding on stage 0, the
   final norm and the head on the last;
2. **tp slice** ``t``: of each such parameter, the tensor-parallel slice of
   :mod:`hydraulis.runtime.optimizer.sharding` — except that every element has exactly one owner: a
   parameter without a tp dimension (RMSNorm weights) belongs to ``t = 0``, and a kv head that
   ``tp_o/U`` ranks would share (``U`` heads < ``tp_o``) to the first of them;
3. **dp chunk** ``d`` (ZeRO-1): the stage's tp slices of rank ``t``, flattened and
   concatenated in canonical order, ``Q`` elements, are cut into ``dp_o`` contiguous chunks
   ``[⌊d·Q/dp_o⌋, ⌊(d+1)·Q/dp_o⌋)``; the chunk is the rank's **buffer** (master weights,
   gradient and moments are flat tensors of its length).

So every element of every parameter has exactly one owner and one position in its buffer
(:meth:`OptimizerPlacement.locate`), and the buffers hold ``≈ P/(dp_o·tp_o·pp_o)`` elements
each. Worked example, ``tiny`` (L = 4, H = 64, V = 1024, P = 315,968) under ``dp2·tp1·pp2`` on
4 ranks: stage 0 holds the embedding and layers 0–1 (65,536 + 2·46,208 = 157,952 elements),
rank 0 the first 78,976 of them, rank 1 the rest; ranks 2 and 3 split layers 2–3, the final norm
and the head (158,016 elements) into 79,008 each.

A compute shard (:class:`~hydraulis.runtime.optimizer.sharding.Shard`) is addressed the same way:
:func:`shard_indices` lists the canonical flat index of each of its elements in the order of
the shard's own flattening. Indices are canonical flat indices into one parameter
(row-major). Only numpy here: the maps are built once per strategy and reused every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hydraulis.runtime.layout import even_split
from hydraulis.runtime.optimizer.sharding import Holder, ParameterSpec, Shard, parameter_specs, unit_range
from hydraulis.types import ModelSpec, OptimizerLayout


@dataclass(frozen=True)
class OwnerPlace:
    """An owner rank's stage, dp rank and tp rank in the optimizer layout."""

    stage: int
    dp_rank: int
    tp_rank: int


@dataclass(frozen=True)
class OwnedRun:
    """A contiguous part of a rank's buffer: the elements ``indices`` (canonical flat indices,
    in buffer order) of parameter ``spec``, starting at ``offset`` in the buffer."""

    spec: ParameterSpec
    offset: int
    indices: np.ndarray


@dataclass(frozen=True)
class _Slice:
    """The tp slice a tp rank owns of one parameter: ``length`` elements of dimension ``dim``
    from ``start`` (``dim`` None: the whole tensor), at ``offset`` in the stage's flattening."""

    dim: int | None
    start: int
    length: int
    offset: int
    numel: int


class OptimizerPlacement:
    """The optimizer layout ``layout`` of ``model`` on a world of ``world_size`` ranks."""

    def __init__(self, model: ModelSpec, layout: OptimizerLayout, world_size: int) -> None:
        layout.check(model, world_size)
        self.model, self.layout, self.world_size = model, layout, world_size
        self.specs = parameter_specs(model)
        split = even_split(model.layers, layout.pp)
        self._stage_layers = [range(sum(split[:s]), sum(split[:s + 1])) for s in range(layout.pp)]
        self._slices: dict[tuple[int, int], dict[str, _Slice]] = {}
        self._totals: dict[tuple[int, int], int] = {}
        for stage in range(layout.pp):
            for tp_rank in range(layout.tp):
                slices, offset = {}, 0
                for spec in self.specs:
                    if self.stage_of(spec) == stage:
                        owned = self._owned_slice(spec, tp_rank, offset)
                        if owned is not None:
                            slices[spec.name] = owned
                            offset += owned.numel
                self._slices[stage, tp_rank] = slices
                self._totals[stage, tp_rank] = offset

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

    def rank(self, place: OwnerPlace) -> int:
        return (place.stage * self.layout.dp + place.dp_rank) * self.layout.tp + place.tp_rank

    def place(self, rank: int) -> OwnerPlace | None:
        """The owner place of ``rank``, None when it owns nothing."""
        if rank >= self.owners:
            return None
        within, tp_rank = divmod(rank, self.layout.tp)
        stage, dp_rank = divmod(within, self.layout.dp)
        return OwnerPlace(stage, dp_rank, tp_rank)

    def buffer_size(self, rank: int) -> int:
        place = self.place(rank)
        if place is None:
            return 0
        start, stop = self._chunk(place)
        return stop - start

    def locate(self, spec: ParameterSpec, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Owner rank and buffer position of each element ``indices`` (canonical flat) of ``spec``."""
        indices = np.asarray(indices, dtype=np.int64)
        stage, tp = self.stage_of(spec), self.layout.tp
        tp_rank = self._owner_tp_rank(spec, indices)
        owner = np.empty_like(indices)
        position = np.empty_like(indices)
        for t in np.unique(tp_rank).tolist():
            mine = tp_rank == t
            owned = self._slices[stage, t][spec.name]
            flat = owned.offset + _slice_position(spec, owned, indices[mine])
            bounds = self._bounds(stage, t)
            dp_rank = np.searchsorted(bounds, flat, side="right") - 1
            owner[mine] = (stage * self.layout.dp + dp_rank) * tp + t
            position[mine] = flat - bounds[dp_rank]
        return owner, position

    def owned_runs(self, rank: int) -> tuple[OwnedRun, ...]:
        """The parameter runs of ``rank``'s buffer, in buffer order (empty when it owns nothing)."""
        place = self.place(rank)
        if place is None:
            return ()
        start, stop = self._chunk(place)
        runs = []
        for name, owned in self._slices[place.stage, place.tp_rank].items():
            lo, hi = max(start, owned.offset), min(stop, owned.offset + owned.numel)
            if lo < hi:
                spec = self._spec(name)
                positions = np.arange(lo - owned.offset, hi - owned.offset, dtype=np.int64)
                runs.append(OwnedRun(spec, lo - start, _canonical_index(spec, owned, positions)))
        return tuple(runs)

    def _owned_slice(self, spec: ParameterSpec, tp_rank: int, offset: int) -> _Slice | None:
        if spec.tp_dim is None:
            return _Slice(None, 0, spec.shape[0], offset, spec.numel) if tp_rank == 0 else None
        units, tp = spec.units, self.layout.tp
        if units < tp and tp_rank % (tp // units):
            return None
        first, count = unit_range(units, tp, tp_rank)
        length = count * spec.unit
        return _Slice(spec.tp_dim, first * spec.unit, length, offset, spec.numel // spec.shape[spec.tp_dim] * length)

    def _owner_tp_rank(self, spec: ParameterSpec, indices: np.ndarray) -> np.ndarray:
        if spec.tp_dim is None:
            return np.zeros_like(indices)
        units, tp = spec.units, self.layout.tp
        unit = _coordinate(spec, indices) // spec.unit
        return unit // (units // tp) if units >= tp else unit * (tp // units)

    def _bounds(self, stage: int, tp_rank: int) -> np.ndarray:
        total, dp = self._totals[stage, tp_rank], self.layout.dp
        return np.array([d * total // dp for d in range(dp + 1)], dtype=np.int64)

    def _chunk(self, place: OwnerPlace) -> tuple[int, int]:
        bounds = self._bounds(place.stage, place.tp_rank)
        return int(bounds[place.dp_rank]), int(bounds[place.dp_rank + 1])

    def _spec(self, name: str) -> ParameterSpec:
        return next(spec for spec in self.specs if spec.name == name)


def shard_indices(shard: Shard) -> np.ndarray:
    """Canonical flat indices of ``shard``'s elements, in the order of the shard flattened."""
    spec = shard.spec
    if shard.dim is None:
        return np.arange(spec.numel, dtype=np.int64)
    rows, columns = spec.shape
    if shard.dim == 0:
        return np.arange(shard.start * columns, (shard.start + shard.length) * columns, dtype=np.int64)
    grid = np.arange(rows, dtype=np.int64)[:, None] * columns + shard.start + np.arange(shard.length)[None, :]
    return grid.ravel()


def _coordinate(spec: ParameterSpec, indices: np.ndarray) -> np.ndarray:
    """Each element's index along ``spec``'s tp dimension."""
    columns = spec.shape[1] if len(spec.shape) == 2 else 1
    return indices // columns if spec.tp_dim == 0 else indices % columns


def _slice_position(spec: ParameterSpec, owned: _Slice, indices: np.ndarray) -> np.ndarray:
    """Position of canonical elements ``indices`` in the tp slice ``owned`` flattened."""
    if owned.dim is None:
        return indices
    columns = spec.shape[1]
    if owned.dim == 0:
        return indices - owned.start * columns
    rows, cols = np.divmod(indices, columns)
    return rows * owned.length + cols - owned.start


def _canonical_index(spec: ParameterSpec, owned: _Slice, positions: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_slice_position`."""
    if owned.dim is None:
        return positions
    columns = spec.shape[1]
    if owned.dim == 0:
        return positions + owned.start * columns
    rows, cols = np.divmod(positions, owned.length)
    return rows * columns + owned.start + cols
