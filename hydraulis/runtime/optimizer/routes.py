"""Gradients from a compute layout into the optimizer layout, weights back out: one route per
(strategy, rank), two all-to-all exchanges per step.

Under a strategy, rank ``r`` holds the shards of its stage (:func:`~hydraulis.runtime.optimizer.sharding.stage_shards`,
nothing when the strategy leaves it idle); every element of a shard has one owner and one
position in the owner's buffer (:meth:`~hydraulis.runtime.optimizer.placement.OptimizerPlacement.locate`).
A :class:`Route` is that map, built once per strategy when the strategy is first used:

1. rank ``r`` flattens its shards in order (``n_r`` elements), locates each element and sorts
   them by owner (stable): ``order``, and ``sent[o]`` elements for owner ``o``;
2. one all-to-all of the counts and one of the positions tell each owner, per source rank, which
   buffer positions the incoming elements go to (``positions``, source-major).

**Reduce** (every step, after the backward passes): rank ``r`` sends its shards' gradients (fp32)
in ``order`` — zeros for shards that only repeat tp rank 0's identical gradient
(:attr:`~hydraulis.runtime.optimizer.sharding.Shard.contributes`, the RMSNorm weights) — with one
``all_to_all_single``; each owner zeroes its gradient buffer and adds the incoming parts source by
source (``index_add_`` per source: no position repeats within one source, so the sum is
deterministic on every device, in rank order). The buffer then holds, for each element, the sum
over every pipeline, cp rank, tp rank and micro-batch that computed it — the single-device
gradient up to the order of the sums (:mod:`..model.loss` normalises by the whole batch). A reduce-scatter
in effect, for any mix of layouts.

**Propagate** (every step, before the forward passes, for the step's strategy): the reverse
exchange — each owner gathers ``θ[positions]`` in the compute dtype and sends it back; rank ``r``
scatters what it receives through ``order`` into its shards. A strategy switch between steps is
therefore just another route: no restart, no full copy of the model anywhere.

**Communication volume per step.** Let ``h(x)`` be the number of ranks that hold element ``x``
under the step's strategy (``Σ_pipelines cp`` for a parameter every pipeline shards by tp; × tp
for the norm weights, replicated over tp). Rank ``r`` sends ``n_r`` gradient values and receives
``Σ_{x owned by r} h(x)``, then the reverse for the weights; summed over ranks both directions move
``Σ_x h(x)`` values. With 4-byte gradients and ``b``-byte weights (4 fp32, 2 bf16)::

    per rank  ≈ (4 + b) · P · h / N     bytes sent and the same received   (h = mean h(x))

minus the part a rank owns itself. For a homogeneous strategy of ``d`` pipelines of
``(cp, tp, pp)`` on ``N = d·cp·tp·pp`` ranks, ``h = d·cp`` and this is ``(4 + b)·P/(tp·pp)`` —
the bytes of a ring reduce-scatter of the ``P/(tp·pp)`` gradients of a rank's shard over its
``d·cp`` replicas plus the all-gather of its updated weights (ZeRO-1), up to the ring's
``(d·cp − 1)/(d·cp)``. Worked example, ``tiny`` (P = 315,968) on 4 ranks under ``1,2,1+1,1,2``
(h = 2 for almost every element) in fp32: ``8·315,968·2/4 ≈ 1.26 MB`` per rank per step each way,
where the canonical all-reduce it replaces moved ``2·¾·4·P ≈ 1.9 MB``. The exchange is
point-to-point (every rank talks to the ranks it shares elements with), so its latency grows
with the number of partners rather than ``log N``; the index tables cost 8 bytes per element a
rank holds or owns, built once per strategy.
"""

from __future__ import annotations

import numpy as np
import torch

from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.optimizer.placement import OptimizerPlacement, shard_indices
from hydraulis.runtime.optimizer.sharding import Shard


class Route:
    """The element routes of one rank's ``shards`` (empty when idle) to and from the owners."""

    def __init__(self, placement: OptimizerPlacement, shards: tuple[Shard, ...], world: ParallelGroup,
                 device: torch.device) -> None:
        self.world, self.shards = world, shards
        owners, positions, contributes = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=np.int64)], []
        for shard in shards:
            owner, position = placement.locate(shard.spec, shard_indices(shard))
            owners.append(owner)
            positions.append(position)
            contributes.append(np.full(owner.size, shard.contributes))
        owner, position = np.concatenate(owners), np.concatenate(positions)
        order = np.argsort(owner, kind="stable")
        sent = np.bincount(owner, minlength=world.size).astype(np.int64)
        received = world.all_to_all(torch.from_numpy(sent).to(device), [1] * world.size, [1] * world.size).cpu()
        self.sent = sent.tolist()
        self.received = received.tolist()
        self.order = torch.from_numpy(order).to(device)
        self.contributes = torch.from_numpy(np.concatenate(contributes or [np.empty(0, dtype=bool)])[order]).to(device)
        self.positions = world.all_to_all(torch.from_numpy(position[order]).to(device), self.received, self.sent)
        self.elements = int(owner.size)

    def reduce(self, grads: list[torch.Tensor | None], into: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
        """``into`` (the owner's gradient buffer) ← the sum of every holder's gradient; ``grads``
        are this rank's shard gradients in shard order (None: no contribution, zeros), sent in
        ``dtype`` and summed in fp32."""
        flat = self._flatten([torch.zeros(s.shape, device=into.device) if g is None else g for g, s in
                              zip(grads, self.shards)], torch.float32, into.device)
        outgoing = torch.where(self.contributes, flat[self.order], torch.zeros((), device=into.device))
        incoming = self.world.all_to_all(outgoing.to(dtype), self.received, self.sent).to(torch.float32)
        into.zero_()
        start = 0
        for count in self.received:
            if count:
                into.index_add_(0, self.positions[start:start + count], incoming[start:start + count])
            start += count

    @torch.no_grad()
    def propagate(self, master: torch.Tensor, params: list[torch.Tensor]) -> None:
        """Copy the owners' ``master`` values of this rank's elements into ``params`` (its shards'
        tensors in shard order, any dtype)."""
        dtype = params[0].dtype if params else master.dtype
        incoming = self.world.all_to_all(master[self.positions].to(dtype), self.sent, self.received)
        flat = torch.empty(self.elements, dtype=dtype, device=master.device)
        flat.index_copy_(0, self.order, incoming)
        start = 0
        for param in params:
            param.copy_(flat[start:start + param.numel()].view_as(param))
            start += param.numel()

    @staticmethod
    def _flatten(tensors: list[torch.Tensor], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        if not tensors:
            return torch.empty(0, dtype=dtype, device=device)
        return torch.cat([t.reshape(-1).to(dtype) for t in tensors])
