"""Regions and blocks against brute force: every shared element appears in exactly one block, at
both holders' positions; blocks stay few however large the regions are."""

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hydraulis.sharding.parameters import Holder, ParameterSpec
from hydraulis.sharding.ranges import Block, Region, overlap


def positions(region: Region) -> dict[int, int]:
    """Canonical flat index → position in the holder's memory, element by element."""
    rows, columns = region.spec.shape
    full = np.arange(rows * columns).reshape(rows, columns)
    part = full[region.start:region.stop] if region.spec.tp_dim == 0 else full[:, region.start:region.stop]
    flat = part.reshape(-1)
    return {int(flat[p]): region.offset + p for p in range(region.lo, region.hi)}


def expanded(blocks: list[Block]) -> list[tuple[int, int]]:
    return [(b.a + i * b.a_stride + j, b.b + i * b.b_stride + j)
            for b in blocks for i in range(b.count) for j in range(b.length)]


@st.composite
def region_pairs(draw):
    rows, columns, dim = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.sampled_from([0, 1]))
    spec = ParameterSpec("w", (rows, columns), Holder.LAYER, 0, dim)
    extent = rows if dim == 0 else columns

    def region():
        start = draw(st.integers(0, extent - 1))
        length = draw(st.integers(1, extent - start))
        whole = Region.slice(spec, start, length)
        lo = draw(st.integers(0, whole.hi - 1))
        return Region(spec, start, length, lo, draw(st.integers(lo + 1, whole.hi)), draw(st.integers(-5, 50)))

    return region(), region()


@settings(max_examples=300, deadline=None)
@given(region_pairs())
def test_blocks_pair_every_shared_element_once(pair):
    first, second = pair
    a, b = positions(first), positions(second)
    expected = sorted((a[x], b[x]) for x in a.keys() & b.keys())
    blocks = overlap(first, second)
    assert sorted(expanded(blocks)) == expected
    assert len(expanded(blocks)) == len(expected)
    assert len(blocks) <= 9
    assert [block.a for block in blocks] == sorted(block.a for block in blocks)


def test_worked_example_of_the_docstring():
    spec = ParameterSpec("w", (4, 6), Holder.LAYER, 0, 1)
    first = Region.slice(spec, 0, 3)
    second = Region(spec, 2, 4, 2, 10, 0)
    assert overlap(first, second) == [Block(5, 4, 2, 1, 3, 4)]


def test_blocks_stay_few_for_large_regions_and_views_move_them():
    spec = ParameterSpec("w", (4096, 11008), Holder.LAYER, 0, 1)
    shard = Region.slice(spec, 1376, 1376)
    owner = Region(spec, 0, 11008, 5_000_000, 29_999_000, -5_000_000)
    blocks = overlap(shard, owner)
    assert len(blocks) == 3
    starts = np.arange(4096) * 11008 + 1376
    shared = np.maximum(0, np.minimum(starts + 1376, 29_999_000) - np.maximum(starts, 5_000_000)).sum()
    assert sum(b.size for b in blocks) == shared
    small = ParameterSpec("v", (3, 4), Holder.LAYER, 0, 1)
    full = torch.arange(12.0)
    column = torch.zeros(6)
    for block in overlap(Region.whole(small), Region.slice(small, 1, 2)):
        block.b_view(column).copy_(block.a_view(full))
    assert column.tolist() == [1, 2, 5, 6, 9, 10]
