"""The baselines: padding and fixed-capacity packing dealt round-robin, and stage 1 followed by
fixed-capacity packing. Every pipeline time is the exact 1F1B simulation of what it received.

The fixed token capacity of a pipeline is ``C = min(C_p, S)``: the training context length
``S`` (the proposal's ``max_seq_len``), as Megatron-LM packs, unless memory allows less.

**Padding** (``padding``). Every sequence is padded to the batch's longest, ``s_max``; a
micro-batch holds a fixed ``m = ⌊C_min/s_max⌋`` sequences (at least 1), where ``C_min`` is the
smallest fixed capacity among the pipelines that can hold ``s_max`` (the others get nothing).
Sequences in batch order form micro-batches of ``m``, dealt round-robin; a micro-batch of ``m'``
sequences costs ``t = c + m'·(a·s_max² + b·s_max)``. Worked example: lengths ``(1000, 200, 300)``,
``C = 2000``: ``m = 2``, micro-batches ``{0, 1}`` and ``{2}`` costing ``c + 2·w(1000)`` and
``c + w(1000)``.

**Fixed packing** (``fixed_packing``, Megatron-LM style). Pieces are packed first-fit
decreasing to the strategy's smallest fixed capacity ``C_min`` (a piece longer than ``C_min``
forms its own micro-batch), and micro-batch ``i`` goes to the next pipeline, cyclically, that can hold
it — with identical pipelines, plain round-robin. It balances token counts, not time.

**Dispatch + fixed packing** (``dispatch_fixed_packing``). Stage 1
(:mod:`hydraulis.dispatch.assign`) gives each pipeline its pieces, then each pipeline packs them
first-fit decreasing to its own fixed capacity, in opening order.
"""

from __future__ import annotations

import numpy as np

from hydraulis.dispatch.batch import Batch
from hydraulis.dispatch.packing import Packing, PackingStatus, first_fit_decreasing
from hydraulis.dispatch.pipelines import PipelineTable, pipeline_makespans


def padded_round_robin(table: PipelineTable, batch: Batch, context: int) -> list[Packing]:
    """The padding baseline with context length ``context``; the strategy must hold the
    longest piece."""
    longest = int(batch.tokens[0])
    eligible = np.flatnonzero(table.capacity[table.group_of] >= longest)
    fixed = np.minimum(table.capacity[table.group_of[eligible]], context)
    per_micro_batch = max(1, int(fixed.min()) // longest)
    in_batch_order = np.lexsort((np.arange(batch.size), batch.sequence))
    chunks = [in_batch_order[i:i + per_micro_batch] for i in range(0, batch.size, per_micro_batch)]
    received: list[list[np.ndarray]] = [[] for _ in range(table.pipelines)]
    for i, chunk in enumerate(chunks):
        received[int(eligible[i % eligible.size])].append(chunk)
    padded_work = table.work(np.array([longest]))[:, 0]
    times = [np.array([table.c[g] + mb.size * padded_work[g] for mb in mbs])
             for mbs, g in zip(received, table.group_of)]
    return _timed(table, received, times, PackingStatus.PADDED)


def packed_round_robin(table: PipelineTable, batch: Batch, work: np.ndarray, context: int) -> list[Packing]:
    """The fixed-packing baseline with context length ``context``; the strategy must hold the
    longest piece."""
    capacity = min(int(table.capacity.min()), context)
    micro_batches = [np.array(b) for b in first_fit_decreasing(batch.tokens, capacity)]
    room = table.capacity[table.group_of]
    received: list[list[np.ndarray]] = [[] for _ in range(table.pipelines)]
    turn = 0
    for mb in micro_batches:
        need = int(batch.tokens[mb].sum())
        while room[turn % table.pipelines] < need:
            turn += 1
        received[turn % table.pipelines].append(mb)
        turn += 1
    return _timed(table, received, _times(table, received, work), PackingStatus.FIXED_CAPACITY)


def fixed_capacity_packings(table: PipelineTable, pieces_of: list[np.ndarray], batch: Batch,
                            work: np.ndarray, context: int) -> list[Packing]:
    """First-fit decreasing of each pipeline's pieces to its fixed capacity ``min(C_p, context)``."""
    received = [[pieces[b] for b in first_fit_decreasing(batch.tokens[pieces], min(int(table.capacity[g]), context))]
                for pieces, g in zip(pieces_of, table.group_of)]
    return _timed(table, received, _times(table, received, work), PackingStatus.FIXED_CAPACITY)


def _times(table: PipelineTable, received: list[list[np.ndarray]], work: np.ndarray) -> list[np.ndarray]:
    return [np.array([table.c[g] + work[g, mb].sum() for mb in mbs]) for mbs, g in zip(received, table.group_of)]


def _timed(table: PipelineTable, received: list[list[np.ndarray]], times: list[np.ndarray],
           status: PackingStatus) -> list[Packing]:
    makespans = pipeline_makespans(times, table.pp[table.group_of].tolist(), table.model)
    return [Packing(tuple(mbs), float(t), status if mbs else PackingStatus.IDLE)
            for mbs, t in zip(received, makespans)]
