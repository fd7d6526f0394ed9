"""Gradient buckets: a stage's shards grouped for the overlapped reduction (no torch).

The runtime exchanges a rank's gradients with the optimizer layout bucket by bucket, each as
soon as the last micro-batch's backward has accumulated it (design §9.4). Buckets follow the
**reverse order of use**: the backward produces the gradients of the stage's last parameters
first, so the shards are taken from last to first and cut into consecutive buckets of at most
``capacity`` elements (a shard larger than that is a bucket of its own); as in PyTorch DDP, the
first bucket is smaller (``first`` elements) so that the exchange starts early. A bucket holds
at most ``⌈E / parts⌉`` of the holder's ``E`` gradient elements: the runtime cuts every stage
in at least :data:`STAGE_BUCKETS` buckets, so a small model's stage (the CPU examples: ``tiny``'s
stages hold 0.3–0.6 MB of fp32 gradients, under DDP's first bucket) still sends its last layers while the backward
computes its first ones; a large model's stage is cut by ``capacity`` alone. Both ends of an
exchange compute a holder's buckets from its shards alone, so they agree without talking; the
cost model counts a stage's buckets by the same rule (:func:`bucket_count`), from its elements.

Worked example: shards of 300, 500, 200 and 700 elements (in order of use), ``first = 400``,
``capacity = 900``: reversed, 700 fills bucket 0 (it exceeds ``first`` alone), 200 opens
bucket 1, 500 joins it (700 ≤ 900), 300 opens bucket 2 (1000 would exceed 900) — buckets
``(2, 1, 1, 0)`` in the shards' order; with ``parts = 4`` the capacity drops to
``⌈1700 / 4⌉ = 425``: 700, 200, 500 and 300 each fill a bucket of their own, ``(3, 2, 1, 0)``.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydraulis.errors import require_int
from hydraulis.layout.sharding import Shard

BUCKET_MB = 25.0
"""The default bucket, in MiB of the reduction's dtype (PyTorch DDP's ``bucket_cap_mb``)."""
FIRST_BUCKET_MB = 1.0
"""The first bucket's cap (DDP's first bucket)."""
STAGE_BUCKETS = 4
"""The fewest buckets the runtime cuts a stage's gradients in (module docstring): on the CPU,
``hydraulis train --model tiny --record-operations`` under ``1,1,2x2`` and ``1,2,1+1,1,2``
hides 0.1 of the reduction with one bucket per stage, 0.4–0.5 with four, no more with eight
(design §9.4)."""


def shard_buckets(shards: Sequence[Shard], capacity: int, first: int, parts: int = 1) -> tuple[int, ...]:
    """The bucket of every shard of ``shards`` (module docstring), in the shards' order, the
    capacity at most ``⌈Σ elements / parts⌉``."""
    first, capacity = bucket_caps(sum(map(shard_numel, shards)), capacity, first, parts)
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


def bucket_caps(elements: int, capacity: int, first: int, parts: int = STAGE_BUCKETS) -> tuple[int, int]:
    """``(first, capacity)`` of a holder of ``elements`` gradient elements: the capacity at most
    ``⌈elements / parts⌉``, the first bucket at most the capacity (the rule of the module docstring)."""
    require_int(capacity, "bucket_elements", minimum=1)
    require_int(first, "first_bucket_elements", minimum=1)
    require_int(parts, "stage_buckets", minimum=1)
    capacity = min(capacity, max(1, -(-elements // parts)))
    return min(first, capacity), capacity


def bucket_count(elements: int, capacity: int, first: int, parts: int = STAGE_BUCKETS) -> int:
    """The buckets :func:`shard_buckets` cuts ``elements`` gradient elements into when every shard
    is small beside a bucket: ``1 + ⌈(E − first) / capacity⌉`` with the caps of
    :func:`bucket_caps` — what the cost model prices (:func:`hydraulis.cost.step.exposed_reduce_ms`).
    E.g. 1,000 elements in buckets of 900 (first 400), ``parts = 4``: caps 250 and 250, 4 buckets."""
    first, capacity = bucket_caps(elements, capacity, first, parts)
    return 1 + -(-max(0, elements - first) // capacity)


def forward_order(counts: Sequence[int]) -> tuple[int, ...]:
    """Every bucket of a strategy in the order its stages' forwards first need them, given
    ``counts[q]`` buckets at position ``q`` (stages ``q`` before their pipeline's last; they are
    numbered ``O_q … O_q + counts[q] − 1`` after the positions before, :mod:`hydraulis.runtime.optimizer.routes`).

    A stage uses its buckets in descending order (its first layers are cut last), and every
    stage starts its forward at once or after the stages ahead of it, so the order takes from
    each position in turn, first stages first: every position's first-needed bucket, then every
    position's second, and so on. One position alone (a strategy of one-stage pipelines): the
    buckets in descending order. Worked example, ``1,2,1+1,1,2`` with four buckets at each
    position (position 0: ``(1,2,1)``'s stage and ``(1,1,2)``'s last, buckets 0–3; position 1:
    ``(1,1,2)``'s first, 4–7): ``7, 3, 6, 2, 5, 1, 4, 0`` — ``(1,2,1)``, which starts at once,
    waits for two buckets before its first layer, not for the five of descending order (nor for
    every bucket, as in ascending order the first stage did)."""
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + require_int(count, "bucket_count", minimum=0))
    order = []
    for rank in range(max(counts, default=0)):
        for position in reversed(range(len(counts))):
            if rank < counts[position]:
                order.append(offsets[position + 1] - 1 - rank)
    return tuple(order)


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
