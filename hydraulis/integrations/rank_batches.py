"""One global batch dealt to ``R`` identical data-parallel ranks and packed into micro-batches,
the same number on every rank (dispatch stages 1 and 2 for identical one-stage pipelines).

Each rank runs micro-batches of at most ``C`` tokens, one after another, so its time is

    T_r = Σ_j (c + Σ_{i ∈ mb_j} (a·s_i² + b·s_i)) = W_r + v_r·c

Stage 1 (:func:`~hydraulis.dispatch.assign.assign_pieces`) gives the sequences, longest first,
to the rank that would finish first, then moves pieces off the slowest; stage 2
(:func:`~hydraulis.dispatch.balanced_packing.balanced_packings`) packs each rank first-fit
decreasing into the fewest micro-batches. Data parallelism needs every rank to run as many
micro-batches (``v = max_r v_r``: one gradient synchronisation each, or the ranks wait forever),
so a rank short of ``v`` splits its micro-batch of most sequences in two (halving its tokens,
costing one ``c``) until it has ``v``; a rank whose micro-batches hold one sequence each takes the
shortest sequence of a rank that can spare one (a micro-batch of two or more).

Worked example: ``R = 2``, ``C = 8``, lengths ``8, 4, 2, 1, 1`` — stage 1: rank 0 ``[8]``,
rank 1 ``[4, 2, 1, 1]``; stage 2: rank 0 one micro-batch, rank 1 one of 8 tokens; both ``v = 1``.
With ``C = 6`` and lengths ``6, 4, 2, 1, 1``: rank 1 packs ``[4, 2]``, ``[1, 1]``, so rank 0 (one
sequence) takes a 1 from rank 1: ``[6]``, ``[1]`` and ``[4, 2]``, ``[1]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.types import PipelineModel, TimeCoefficients
from hydraulis.dispatch.assign import assign_pieces
from hydraulis.dispatch.balanced_packing import balanced_packings
from hydraulis.dispatch.options import DispatchOptions
from hydraulis.dispatch.pipelines import PipelineTable

RankMicroBatches = tuple[tuple[tuple[int, ...], ...], ...]
"""``plan[r][j]``: the sequence indices of rank ``r``'s micro-batch ``j``, in running order."""


def rank_micro_batches(lengths: Sequence[int] | np.ndarray, ranks: int, time: TimeCoefficients,
                       max_tokens: int, micro_batches: int | None = None) -> RankMicroBatches:
    """The plan of the module docstring for sequences of ``lengths`` (index = sequence), with
    ``v = micro_batches`` if given (a runtime's fixed count per step, torchtitan's gradient
    accumulation; fewer than ``max_r v_r`` is refused), else ``v = max_r v_r``."""
    require_int(ranks, "num_replicas", minimum=1)
    require_int(max_tokens, "max_tokens", minimum=1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    require(lengths.size >= ranks, "batch_size", int(lengths.size), f"must be at least the {ranks} ranks")
    if micro_batches is not None:
        require_int(micro_batches, "micro_batches", minimum=1)
        require(lengths.size >= ranks * micro_batches, "batch_size", int(lengths.size),
                f"must be at least ranks × micro_batches = {ranks * micro_batches} (a sequence a micro-batch)")
    require(int(lengths.min()) >= 1, "lengths", int(lengths.min()), "must be at least 1 token")
    require(int(lengths.max()) <= max_tokens, "sequence length", int(lengths.max()),
            f"exceeds max_tokens = {max_tokens}, what one micro-batch holds")
    order = np.argsort(-lengths, kind="stable")
    tokens = lengths[order]
    table = PipelineTable(a=np.array([time.a]), b=np.array([time.b]), c=np.array([time.c]),
                          pp=np.ones(1, np.int64), capacity=np.array([max_tokens]), devices=np.ones(1, np.int64),
                          group_of=np.zeros(ranks, np.int64), model=PipelineModel())
    work = table.work(tokens)
    options = DispatchOptions()
    owner = assign_pieces(table, tokens, work, options.bubble_factor, options.local_moves)
    pieces_of = [np.flatnonzero(owner == r) for r in range(ranks)]
    packings = balanced_packings(table, pieces_of, tokens, work, options.bubble_factor)
    plan = [[[int(order[k]) for k in mb] for mb in packing.micro_batches] for packing in packings]
    fewest = max(len(rank) for rank in plan)
    if micro_batches is not None:
        require(micro_batches >= fewest, "micro_batches", micro_batches,
                f"is fewer than the {fewest} micro-batches of at most max_tokens = {max_tokens} tokens this global "
                f"batch needs on its fullest rank")
    return _equal_counts(plan, lengths, fewest if micro_batches is None else micro_batches)


def _equal_counts(plan: list[list[list[int]]], lengths: np.ndarray, target: int) -> RankMicroBatches:
    """Every rank brought to ``target`` micro-batches (module docstring)."""
    for rank in plan:
        while len(rank) < target:
            widest = max(rank, key=len, default=[])
            if len(widest) >= 2:
                ordered = sorted(widest, key=lambda i: -lengths[i])
                rank.remove(widest)
                rank.extend([ordered[0::2], ordered[1::2]])
            else:
                rank.append([_spare(plan, lengths)])
    return tuple(tuple(tuple(mb) for mb in rank) for rank in plan)


def _spare(plan: list[list[list[int]]], lengths: np.ndarray) -> int:
    """The shortest sequence of a micro-batch of two or more, taken out of it."""
    donors = [mb for rank in plan for mb in rank if len(mb) >= 2]
    if not donors:
        raise HydraulisError("batch_size", sum(len(mb) for rank in plan for mb in rank),
                             "is too small to give every rank as many micro-batches")
    i = min((i for mb in donors for i in mb), key=lambda i: (lengths[i], i))
    next(mb for mb in donors if i in mb).remove(i)
    return i
