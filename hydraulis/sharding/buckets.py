"""Gradient buckets: a stage's shards grouped for the overlapped reduction (no torch).

The runtime exchanges a rank's gradients with the optimizer layout bucket by bucket, each as
soon as the last micro-batch's backward has accumulated it (design §9.4). Buckets follow the
**reverse order of use**: the backward produces the gradients of the stage's last parameters
first, so the shards are taken from last to first and cut into consecutive buckets of at most
``capacity`` elements (a shard larger than that is a bucket of its own); as in PyTorch DDP, the
first bucket holds at most ``first`` elements so that the exchange starts early. Both ends of an
exchange compute a holder's buckets from its shards alone, so they agree without talking; the
cost model counts a stage's buckets by the same rule (:func:`bucket_count`), from its elements.

Worked example: shards of 300, 500, 200 and 700 elements (in order of use), ``first = 400``,
``capacity = 900``: reversed, 700 fills bucket 0 (it exceeds ``first`` alone), 200 opens
bucket 1, 500 joins it (700 ≤ 900), 300 opens bucket 2 (1000 would exceed 900) — buckets
``(2, 1, 1, 0)`` in the shards' order.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.base.errors import require_int
from hydraulis.sharding.parameters import Shard

BUCKET_MB = 25.0
"""The default bucket, in MiB of the reduction's dtype (PyTorch DDP's ``bucket_cap_mb``)."""
FIRST_BUCKET_MB = 1.0
"""The first bucket's cap (DDP's first bucket)."""


def shard_buckets(shards: Sequence[Shard], capacity: int, first: int) -> tuple[int, ...]:
    """The bucket of every shard of ``shards`` (module docstring), in the shards' order."""
    require_int(capacity, "bucket_elements", minimum=1)
    require_int(first, "first_bucket_elements", minimum=1)
    buckets = [0] * len(shards)
    bucket, filled, cap = 0, 0, first
    for index in reversed(range(len(shards))):
        size = shard_numel(shards[index])
        if filled and filled + size > cap:
            bucket, filled, cap = bucket + 1, 0, capacity
        buckets[index] = bucket
        filled += size
        if filled >= cap:
            bucket, filled, cap = bucket + 1, 0, capacity
    return tuple(buckets)


def bucket_count(elements: int, capacity: int, first: int) -> int:
    """The buckets :func:`shard_buckets` cuts ``elements`` gradient elements into when every shard
    is small beside a bucket: ``n = 1 + ⌈(E − first)⁺ / capacity⌉`` — what the cost model prices
    (:func:`hydraulis.cost.step.exposed_reduce_ms`). E.g. 1,000 elements in buckets of 250 (first
    100): ``1 + ⌈900 / 250⌉ = 5``."""
    require_int(capacity, "bucket_elements", minimum=1)
    require_int(first, "first_bucket_elements", minimum=1)
    return 1 + -(-max(0, elements - first) // capacity)


def bucket_elements(bucket_mb: float, element_bytes: int) -> tuple[int, int]:
    """``(capacity, first)`` in elements of ``element_bytes`` for buckets of ``bucket_mb`` MiB
    (the first of at most :data:`FIRST_BUCKET_MB`)."""
    capacity = max(1, int(bucket_mb * 2**20) // element_bytes)
    return capacity, max(1, min(capacity, int(FIRST_BUCKET_MB * 2**20) // element_bytes))


def shard_numel(shard: Shard) -> int:
    """Elements of ``shard``."""
    count = 1
    for n in shard.shape:
        count *= n
    return count
