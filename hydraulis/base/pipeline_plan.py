"""A step plan's pipelines stored compactly (design §8): the pipeline classes once, every
micro-batch's sequences as flat integer arrays, and :class:`MicroBatch` / :class:`PipelinePlan`
objects made only when read. Re-exported by :mod:`hydraulis.base.step_plan`.

Micro-batch ``j`` holds ``sequences[bounds[j]:bounds[j+1]]`` (with their ``lengths``); pipeline
``p`` runs micro-batches ``pipeline_bounds[p]:pipeline_bounds[p+1]``; the first ``classes[0].count``
pipelines are of class 0, the next ``classes[1].count`` of class 1, and so on. Example: classes
``2×((1,8,1), 32768), 1×((1,16,1), 131072)``, pipeline_bounds ``(0, 2, 3, 5)``, bounds
``(0, 2, 3, 4, 5, 7)``, sequences ``(4, 0, 2, 5, 1, 3, 6)``: pipeline 0 runs ``(4, 0)`` then
``(2,)``, pipeline 1 runs ``(5,)``, pipeline 2 (of class 1) runs ``(1,)`` then ``(3, 6)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.scheme import Scheme


@dataclass(frozen=True)
class MicroBatch:
    """Sequences packed together: ``sequences`` index the batch's lengths, ``lengths`` copies
    them so a micro-batch is self-describing."""

    sequences: tuple[int, ...]
    lengths: tuple[int, ...]

    def __post_init__(self) -> None:
        require(len(self.sequences) == len(self.lengths), "micro_batch.lengths", len(self.lengths),
                f"must have one entry per sequence ({len(self.sequences)})")

    @property
    def tokens(self) -> int:
        return sum(self.lengths)

    def cu_seqlens(self, alignment: int = 1) -> tuple[int, ...]:
        """Cumulative sequence starts ``(0, s₁', s₁'+s₂', …)`` with each length rounded up to a
        multiple of ``alignment`` (e.g. alignment 8 turns lengths (5, 9) into (0, 8, 24))."""
        require_int(alignment, "alignment", minimum=1)
        bounds = [0]
        for length in self.lengths:
            bounds.append(bounds[-1] + math.ceil(length / alignment) * alignment)
        return tuple(bounds)


@dataclass(frozen=True, eq=False)
class MicroBatches(Sequence[MicroBatch]):
    """Micro-batches in execution order as three read-only integer arrays: micro-batch ``j``
    holds ``sequences[bounds[j]:bounds[j+1]]`` with ``lengths`` alongside. Indexing or iterating
    makes :class:`MicroBatch` objects; equal to another one (or to a tuple of
    :class:`MicroBatch`) holding the same micro-batches."""

    sequences: np.ndarray
    lengths: np.ndarray
    bounds: np.ndarray

    def __post_init__(self) -> None:
        for name in ("sequences", "lengths", "bounds"):
            object.__setattr__(self, name, frozen_array(getattr(self, name), f"micro_batches.{name}", np.int64))
        count = self.sequences.size
        require(self.lengths.size == count, "micro_batches.lengths", self.lengths.size,
                f"must have one entry per sequence ({count})")
        _require_bounds(self.bounds, count, "micro_batches.bounds", "sequences")

    @classmethod
    def of(cls, micro_batches: Iterable[MicroBatch]) -> MicroBatches:
        """The compact form of ``micro_batches`` (already compact: as it is)."""
        if isinstance(micro_batches, MicroBatches):
            return micro_batches
        listed = list(micro_batches)
        sizes = [len(mb.sequences) for mb in listed]
        return cls([s for mb in listed for s in mb.sequences], [s for mb in listed for s in mb.lengths], _offsets(sizes))

    @classmethod
    def joined(cls, parts: Sequence[MicroBatches]) -> MicroBatches:
        """``parts``' micro-batches one after the other."""
        if not parts:
            return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.zeros(1, np.int64))
        return cls(np.concatenate([p.sequences for p in parts]), np.concatenate([p.lengths for p in parts]),
                   _offsets(np.concatenate([np.diff(p.bounds) for p in parts])))

    def window(self, start: int, stop: int) -> MicroBatches:
        """Micro-batches ``start:stop`` (``0 ≤ start ≤ stop ≤ len``), sharing this one's arrays
        (made without checks: a part of checked arrays needs none)."""
        first, last = self.bounds[start], self.bounds[stop]
        bounds = self.bounds[start:stop + 1] - first
        bounds.flags.writeable = False
        window = object.__new__(MicroBatches)
        window.__dict__.update(sequences=self.sequences[first:last], lengths=self.lengths[first:last], bounds=bounds)
        return window

    @property
    def sizes(self) -> np.ndarray:
        """Sequences per micro-batch."""
        return np.diff(self.bounds)

    @property
    def tokens(self) -> np.ndarray:
        """Tokens per micro-batch (``Σ`` of its lengths)."""
        cumulative = np.concatenate(([0], np.cumsum(self.lengths)))
        return cumulative[self.bounds[1:]] - cumulative[self.bounds[:-1]]

    def aligned_lengths(self, alignment: int = 1) -> np.ndarray:
        """Every sequence's length rounded up to a multiple of ``alignment`` (the tokens it occupies)."""
        require_int(alignment, "alignment", minimum=1)
        return -(-self.lengths // alignment) * alignment

    def cu_seqlens(self, alignment: int = 1) -> np.ndarray:
        """Every micro-batch's :meth:`MicroBatch.cu_seqlens` one after the other (micro-batch
        ``j``'s are entries ``bounds[j]+j : bounds[j+1]+j+1``), computed in one pass."""
        cumulative = np.concatenate(([0], np.cumsum(self.aligned_lengths(alignment))))
        owner = np.repeat(np.arange(len(self)), self.sizes + 1)
        flat = np.arange(self.sequences.size + len(self)) - owner
        return cumulative[flat] - cumulative[self.bounds[:-1]][owner]

    def __len__(self) -> int:
        return self.bounds.size - 1

    @overload
    def __getitem__(self, index: int) -> MicroBatch: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[MicroBatch, ...]: ...

    def __getitem__(self, index: int | slice) -> MicroBatch | tuple[MicroBatch, ...]:
        if isinstance(index, slice):
            return tuple(self[j] for j in range(len(self))[index])
        j = range(len(self))[index]
        first, last = self.bounds[j], self.bounds[j + 1]
        return MicroBatch(tuple(self.sequences[first:last].tolist()), tuple(self.lengths[first:last].tolist()))

    def __iter__(self) -> Iterator[MicroBatch]:
        sequences, lengths, bounds = self.sequences.tolist(), self.lengths.tolist(), self.bounds.tolist()
        for first, last in zip(bounds, bounds[1:]):
            yield MicroBatch(tuple(sequences[first:last]), tuple(lengths[first:last]))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MicroBatches):
            return all(np.array_equal(getattr(self, f), getattr(other, f)) for f in ("bounds", "sequences", "lengths"))
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MicroBatches({list(self)!r})"

    def __setstate__(self, state: dict) -> None:
        _set_frozen_state(self, state)


@dataclass(frozen=True)
class PipelineClass:
    """``count`` consecutive pipelines of a plan running ``scheme`` with micro-batches of at
    most ``max_seq_len`` tokens (a strategy's pipeline group, its time model left out)."""

    scheme: Scheme
    max_seq_len: int
    count: int

    def __post_init__(self) -> None:
        require_int(self.max_seq_len, "pipeline_class.max_seq_len")
        require_int(self.count, "pipeline_class.count", minimum=1)


def pipeline_classes(groups: Iterable[tuple[Scheme, int, int]]) -> tuple[PipelineClass, ...]:
    """:class:`PipelineClass` runs of ``(scheme, max_seq_len, count)`` groups in order, neighbours
    with the same scheme and ``max_seq_len`` merged (the one way to write a plan's classes)."""
    classes: list[PipelineClass] = []
    for scheme, max_seq_len, count in groups:
        if classes and (classes[-1].scheme, classes[-1].max_seq_len) == (scheme, max_seq_len):
            count += classes.pop().count
        classes.append(PipelineClass(scheme, max_seq_len, count))
    return tuple(classes)


@dataclass(frozen=True)
class PipelinePlan:
    """One pipeline's share of a step: its micro-batches in execution order, how its packing was
    obtained (``solver_status``) and, when proven, a lower bound on its time for its number of
    micro-batches (``proven_ms``: its own time when the packing is proven optimal). Given a
    tuple of :class:`MicroBatch`, it keeps them as :class:`MicroBatches`."""

    scheme: Scheme
    max_seq_len: int
    micro_batches: MicroBatches
    predicted_ms: float
    solver_status: str = ""
    proven_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "micro_batches", MicroBatches.of(self.micro_batches))


@dataclass(frozen=True, eq=False)
class PipelinePlans(Sequence[PipelinePlan]):
    """A plan's pipelines in :meth:`~hydraulis.base.strategy.Strategy.expanded` order, stored
    once per class (``classes``, canonical: neighbours differ) and as arrays: all micro-batches
    (pipeline ``p`` runs ``micro_batches[pipeline_bounds[p]:pipeline_bounds[p+1]]``), per
    pipeline its ``predicted_ms``, ``solver_status`` and ``proven_ms`` (NaN: none). Indexing
    makes a :class:`PipelinePlan`; two are equal when they plan the same."""

    classes: tuple[PipelineClass, ...]
    micro_batches: MicroBatches
    pipeline_bounds: np.ndarray
    predicted_ms: np.ndarray
    solver_status: tuple[str, ...]
    proven_ms: np.ndarray
    class_of: np.ndarray = field(init=False, repr=False)
    """Every pipeline's index in ``classes`` (derived)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(self.classes))
        object.__setattr__(self, "solver_status", tuple(self.solver_status))
        object.__setattr__(self, "pipeline_bounds",
                           frozen_array(self.pipeline_bounds, "pipelines.pipeline_bounds", np.int64))
        for name in ("predicted_ms", "proven_ms"):
            object.__setattr__(self, name, frozen_array(getattr(self, name), f"pipelines.{name}", np.float64))
        count = sum(c.count for c in self.classes)
        _require_bounds(self.pipeline_bounds, len(self.micro_batches), "pipelines.pipeline_bounds", "micro-batches")
        for name in ("pipeline_bounds", "predicted_ms", "solver_status", "proven_ms"):
            size = len(getattr(self, name)) - (name == "pipeline_bounds")
            require(size == count, f"pipelines.{name}", size, f"must have one entry per pipeline ({count}, "
                    "the classes' counts)")
        merged = pipeline_classes((c.scheme, c.max_seq_len, c.count) for c in self.classes)
        require(merged == self.classes, "pipelines.classes", [f"{c.count}×{c.scheme}" for c in self.classes],
                "must not repeat a class in neighbouring entries (merge them)")
        class_of = np.repeat(np.arange(len(self.classes)), [c.count for c in self.classes])
        class_of.flags.writeable = False
        object.__setattr__(self, "class_of", class_of)

    @classmethod
    def of(cls, pipelines: Iterable[PipelinePlan]) -> PipelinePlans:
        """The compact form of ``pipelines`` (already compact: as they are)."""
        if isinstance(pipelines, PipelinePlans):
            return pipelines
        listed = list(pipelines)
        return cls(classes=pipeline_classes((p.scheme, p.max_seq_len, 1) for p in listed),
                   micro_batches=MicroBatches.joined([p.micro_batches for p in listed]),
                   pipeline_bounds=_offsets([len(p.micro_batches) for p in listed]),
                   predicted_ms=[p.predicted_ms for p in listed], solver_status=[p.solver_status for p in listed],
                   proven_ms=[math.nan if p.proven_ms is None else p.proven_ms for p in listed])

    def __len__(self) -> int:
        return self.class_of.size

    @overload
    def __getitem__(self, index: int) -> PipelinePlan: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[PipelinePlan, ...]: ...

    def __getitem__(self, index: int | slice) -> PipelinePlan | tuple[PipelinePlan, ...]:
        if isinstance(index, slice):
            return tuple(self[p] for p in range(len(self))[index])
        p = range(len(self))[index]
        return self._pipeline(self.classes[self.class_of[p]], int(self.pipeline_bounds[p]),
                              int(self.pipeline_bounds[p + 1]), float(self.predicted_ms[p]), self.solver_status[p],
                              float(self.proven_ms[p]))

    def __iter__(self) -> Iterator[PipelinePlan]:
        bounds = self.pipeline_bounds.tolist()
        for c, first, last, predicted, status, proven in zip(self.class_of.tolist(), bounds, bounds[1:],
                                                            self.predicted_ms.tolist(), self.solver_status,
                                                            self.proven_ms.tolist()):
            yield self._pipeline(self.classes[c], first, last, predicted, status, proven)

    def _pipeline(self, kind: PipelineClass, first: int, last: int, predicted_ms: float, status: str,
                  proven_ms: float) -> PipelinePlan:
        return PipelinePlan(kind.scheme, kind.max_seq_len, self.micro_batches.window(first, last), predicted_ms,
                            status, None if math.isnan(proven_ms) else proven_ms)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PipelinePlans):
            return (self.classes == other.classes and self.solver_status == other.solver_status
                    and self.micro_batches == other.micro_batches
                    and np.array_equal(self.pipeline_bounds, other.pipeline_bounds)
                    and np.array_equal(self.predicted_ms, other.predicted_ms)
                    and np.array_equal(self.proven_ms, other.proven_ms, equal_nan=True))
        if isinstance(other, (tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __setstate__(self, state: dict) -> None:
        _set_frozen_state(self, state)


def frozen_array(values: Any, name: str, dtype: type) -> np.ndarray:
    """``values`` as a one-dimensional read-only array of ``dtype`` (integers for an integer
    ``dtype``); a read-only array of that type is kept, anything else copied."""
    if isinstance(values, np.ndarray) and values.dtype == dtype and not values.flags.writeable and values.ndim == 1:
        return values
    array = np.array(values)
    if array.size == 0:
        array = array.astype(dtype).reshape(0)
    kinds = "iu" if np.issubdtype(dtype, np.integer) else "iuf"
    if array.ndim != 1 or array.dtype.kind not in kinds:
        raise HydraulisError(name, _short(values), f"must be a list of {'integers' if kinds == 'iu' else 'numbers'}")
    array = array.astype(dtype, copy=False)
    array.flags.writeable = False
    return array


def _set_frozen_state(instance: object, state: dict) -> None:
    """Unpickling: arrays come back writable, so freeze them again."""
    for value in state.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    instance.__dict__.update(state)


def _require_bounds(bounds: np.ndarray, count: int, name: str, of: str) -> None:
    if not (bounds.size >= 1 and bounds[0] == 0 and bounds[-1] == count and np.all(bounds[1:] >= bounds[:-1])):
        raise HydraulisError(name, _short(bounds), f"must rise from 0 to the number of {of} ({count})")


def _offsets(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def _short(values: Any) -> Any:
    listed = values.tolist() if isinstance(values, np.ndarray) else values
    return listed[:8] + ["…"] if isinstance(listed, list) and len(listed) > 8 else listed
