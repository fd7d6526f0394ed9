"""Where two holders' parts of one parameter meet, as ranges: never one entry per element.

Every holder of parameter elements — a compute shard (:mod:`.parameters`), an owner's buffer in
the optimizer layout (:mod:`.placement`), the canonical full tensor — keeps a **region** of each
parameter: a tensor-parallel slice, flattened row-major, possibly cut to an interval of that
flattening, at an offset in the holder's flat memory. View the parameter as a matrix of ``R``
rows and ``C`` columns (a vector is one row) sliced along dimension ``d`` (its tp dimension; a
parameter without one along the rows, whole). The slice ``[s, s + l)`` flattens as::

    d = 0:  element (r, c) at (r − s)·C + c          (rows s … s+l−1, contiguous)
    d = 1:  element (r, c) at r·l + (c − s)           (columns s … s+l−1, one run per row)

A region keeps the flattened positions ``[lo, hi)`` of its slice, position ``p`` at ``offset + p``.

The details: :class:`Region`."""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.sharding.parameters import ParameterSpec, Shard


@dataclass(frozen=True)
class Region:
    """Positions ``[lo, hi)`` of the slice ``[start, start + length)`` of ``spec`` (module
    docstring), position ``p`` at ``offset + p`` in its holder's flat memory.

    Two regions ``A`` and ``B`` of one parameter share the elements of the slices' intersection
    ``[s, e)`` within both intervals: a few **blocks** — ``count`` runs of ``length`` elements, run
    ``i`` at ``a + i·a_stride`` in ``A``'s memory and ``b + i·b_stride`` in ``B``'s
    (:func:`overlap`). Along rows the shared elements are one run; along columns one run per row
    (``R`` runs, strides ``l_A`` and ``l_B``), and each interval cuts a strided block into at most
    three: a partial first run, whole runs, a partial last run. So two regions share at most nine
    blocks whatever their sizes, and a map between two layouts is ``O(regions)``.

    Worked example: a ``4 × 6`` matrix sliced along columns; ``A`` holds columns 0–2 whole
    (``l_A = 3``), ``B`` columns 2–5 (``l_B = 4``) but only the positions ``[2, 10)`` of its
    flattening. They share column 2: runs at ``a = 2 + 3·i``, ``b = 0 + 4·i``; ``B``'s interval
    keeps rows 1 and 2 (positions 4 and 8) — one block ``a = 5, b = 4, count = 2, length = 1,
    a_stride = 3, b_stride = 4``.

    A block addresses a flat contiguous tensor as a ``count × length`` strided view
    (:meth:`Block.a_view`, :meth:`Block.b_view`, no copy), so a whole block moves with one copy.
    """

    spec: ParameterSpec
    start: int
    length: int
    lo: int
    hi: int
    offset: int

    @classmethod
    def whole(cls, spec: ParameterSpec) -> Region:
        """The canonical tensor: every element at its canonical flat index."""
        rows, columns, dim = grid(spec)
        return cls.slice(spec, 0, rows if dim == 0 else columns)

    @classmethod
    def slice(cls, spec: ParameterSpec, start: int, length: int, offset: int = 0) -> Region:
        """The whole slice ``[start, start + length)``, position ``p`` at ``offset + p``."""
        rows, columns, dim = grid(spec)
        return cls(spec, start, length, 0, length * (columns if dim == 0 else rows), offset)

    @classmethod
    def of_shard(cls, shard: Shard) -> Region:
        """A compute shard, flattened in its own tensor."""
        return cls.whole(shard.spec) if shard.dim is None else cls.slice(shard.spec, shard.start, shard.length)

    @property
    def stop(self) -> int:
        return self.start + self.length

    @property
    def size(self) -> int:
        return self.hi - self.lo


@dataclass(frozen=True)
class Block:
    """``count`` runs of ``length`` elements: run ``i`` at ``a + i·a_stride`` on one side and
    ``b + i·b_stride`` on the other."""

    a: int
    b: int
    count: int
    length: int
    a_stride: int
    b_stride: int

    @property
    def size(self) -> int:
        return self.count * self.length

    def a_view(self, flat):
        """The block's elements of the contiguous 1-D tensor ``flat`` on side ``a``, ``count × length``."""
        return strided(flat, self.a, self.count, self.length, self.a_stride)

    def b_view(self, flat):
        return strided(flat, self.b, self.count, self.length, self.b_stride)

    def swapped(self) -> Block:
        return Block(self.b, self.a, self.count, self.length, self.b_stride, self.a_stride)

    def clipped(self, lo: int, hi: int) -> list[Block]:
        """The parts whose ``a`` positions lie in ``[lo, hi)``: at most a partial first run,
        whole runs and a partial last run."""
        stride, length = self.a_stride, self.length
        first = max(0, (lo - self.a - length) // stride + 1)
        last = min(self.count - 1, (hi - self.a - 1) // stride)
        if first > last:
            return []
        head = max(lo - (self.a + first * stride), 0)
        tail = max(self.a + last * stride + length - hi, 0)
        if first == last:
            return [self._run(first, head, length - tail)]
        parts = []
        if head:
            parts.append(self._run(first, head, length))
            first += 1
        if tail:
            last -= 1
        if first <= last:
            parts.append(Block(self.a + first * stride, self.b + first * self.b_stride, last - first + 1, length,
                               stride, self.b_stride))
        if tail:
            parts.append(self._run(last + 1, 0, length - tail))
        return parts

    def _run(self, row: int, begin: int, end: int) -> Block:
        return _run(self.a + row * self.a_stride + begin, self.b + row * self.b_stride + begin, end - begin)


def grid(spec: ParameterSpec) -> tuple[int, int, int]:
    """``(R, C, d)``: ``spec`` as a matrix and the dimension its slices cut (:class:`Region`)."""
    rows, columns = spec.shape if len(spec.shape) == 2 else (1, spec.shape[0])
    return rows, columns, spec.tp_dim or 0


def overlap(first: Region, second: Region) -> list[Block]:
    """The blocks of the elements both regions hold (``a``: in ``first``'s memory, ``b``: in
    ``second``'s), in order of ``a``, adjacent contiguous blocks merged."""
    start, stop = max(first.start, second.start), min(first.stop, second.stop)
    if start >= stop:
        return []
    rows, columns, dim = grid(first.spec)
    if dim == 0:
        blocks = [_run((start - first.start) * columns, (start - second.start) * columns, (stop - start) * columns)]
    else:
        blocks = [Block(start - first.start, start - second.start, rows, stop - start, first.length, second.length)]
    blocks = [part for block in blocks for part in block.clipped(first.lo, first.hi)]
    blocks = [part.swapped() for block in blocks for part in block.swapped().clipped(second.lo, second.hi)]
    return _merged(Block(b.a + first.offset, b.b + second.offset, b.count, b.length, b.a_stride, b.b_stride)
                   for b in blocks)


def _run(a: int, b: int, length: int) -> Block:
    return Block(a, b, 1, length, length, length)


def _merged(blocks) -> list[Block]:
    """Blocks contiguous on both sides become one run; consecutive runs join."""
    merged: list[Block] = []
    for block in sorted(blocks, key=lambda b: b.a):
        if block.count > 1 and block.a_stride == block.length == block.b_stride:
            block = _run(block.a, block.b, block.size)
        last = merged[-1] if merged else None
        if (last is not None and last.count == 1 and block.count == 1 and block.a == last.a + last.length
                and block.b == last.b + last.length):
            merged[-1] = _run(last.a, last.b, last.length + block.length)
        else:
            merged.append(block)
    return merged


def strided(flat, offset: int, count: int, length: int, stride: int):
    """Runs ``i < count`` of ``length`` elements at ``offset + i·stride`` of the contiguous 1-D
    tensor ``flat``, as a ``count × length`` view."""
    return flat.as_strided((count, length), (stride, 1), flat.storage_offset() + offset)
