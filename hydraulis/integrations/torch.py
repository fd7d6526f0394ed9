"""``BalancedBatchSampler``: per-step data assignment for PyTorch DDP/FSDP and the Hugging Face
``Trainer`` with one homogeneous strategy (docs/integrations.md).

``DistributedSampler`` deals every rank the same *number* of sequences; with long-tailed lengths
the rank that drew the long ones sets every step, and ranks that form different numbers of
micro-batches hang DDP. This sampler cuts each epoch's shuffled indices into global batches of
``batch_size`` sequences and plans every one with
:func:`~hydraulis.integrations.rank_batches.rank_micro_batches`: sequences to ranks by predicted
time ``c + a·s² + b·s``, packed into micro-batches of at most ``max_tokens`` tokens, the same
number on every rank. It yields this rank's micro-batches as lists of dataset indices — a
``batch_sampler`` for ``torch.utils.data.DataLoader``.

Every rank computes the same plan from the same seed, epoch and lengths (nothing is
communicated); :meth:`state_dict` / :meth:`load_state_dict` resume mid-epoch. With the
``Trainer``, use :class:`hydraulis.integrations.hf.BalancedTrainer`. A loader of this sampler must
not be sharded again: ``batch_size`` raises, so accelerate's ``prepare`` with several processes
refuses it (prepare it with ``num_processes=1``, as ``hf.balanced_train_dataloader`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from hydraulis.artifacts.scheme_space import read_scheme_space
from hydraulis.base.errors import HydraulisError, require, require_int
from hydraulis.base.types import OptimizerLayout, Scheme, SchemeSpace, TimeCoefficients
from hydraulis.cost.memory import memory_breakdown
from hydraulis.integrations.rank_batches import RankMicroBatches, rank_micro_batches

log = logging.getLogger(__name__)


class BalancedBatchSampler:
    """This rank's micro-batches of every global batch (module docstring); ``lengths[i]`` is
    dataset item ``i``'s token count. A last global batch of fewer than ``batch_size`` items is
    dropped. ``micro_batches``: as many on every rank for every global batch (else the fewest
    that hold each batch)."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, *, batch_size: int, time: TimeCoefficients,
                 max_tokens: int, num_replicas: int, rank: int, seed: int = 0,
                 micro_batches: int | None = None) -> None:
        self.lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        require_int(num_replicas, "num_replicas", minimum=1)
        require_int(rank, "rank", minimum=0, maximum=num_replicas - 1)
        require_int(batch_size, "batch_size", minimum=num_replicas)
        require(self.lengths.size >= batch_size, "lengths", int(self.lengths.size),
                f"must hold at least one global batch of batch_size = {batch_size}")
        require_int(seed, "seed")
        if micro_batches is not None:
            require_int(micro_batches, "micro_batches", minimum=1)
            require(batch_size >= num_replicas * micro_batches, "batch_size", batch_size,
                    f"must be at least num_replicas × micro_batches = {num_replicas * micro_batches} "
                    f"(a sequence a micro-batch)")
        self.global_batch_size, self.time, self.max_tokens = batch_size, time, max_tokens
        self.micro_batches = micro_batches
        self.num_replicas, self.rank, self.seed = num_replicas, rank, seed
        self.epoch = 0
        self.done = 0
        self._plans: tuple[int, list[RankMicroBatches]] | None = None

    @classmethod
    def from_space(cls, lengths: Sequence[int] | np.ndarray, *, batch_size: int, space: SchemeSpace | str | Path,
                   scheme: Scheme, num_replicas: int, rank: int, seed: int = 0) -> BalancedBatchSampler:
        """The sampler for pipelines of ``scheme`` (``pp = 1``) from ``space``: its time
        coefficients, and as ``max_tokens`` the longest sequence it holds under ZeRO-1 over the
        ``num_replicas`` replicas (design §6.4)."""
        space = space if isinstance(space, SchemeSpace) else read_scheme_space(space)
        require(scheme.pp == 1, "scheme", str(scheme), "must have pp = 1 (one pipeline stage per rank)")
        profile = space.profile(scheme)
        layout = OptimizerLayout(dp=num_replicas, tp=scheme.tp, pp=1)
        max_tokens = memory_breakdown(space.memory, space.model, profile, layout).max_seq_len
        require(max_tokens > 0, "scheme", str(scheme), "holds no token: its model states fill the device")
        return cls(lengths, batch_size=batch_size, time=profile.time, max_tokens=max_tokens,
                   num_replicas=num_replicas, rank=rank, seed=seed)

    @property
    def batch_size(self) -> int:
        """Refused: accelerate reads it to re-shard a batch sampler over the processes, but this one
        yields this rank's micro-batches already (use ``global_batch_size``)."""
        raise HydraulisError("batch_size", self.global_batch_size,
                             "is not a per-process batch size: BalancedBatchSampler yields this rank's micro-batches "
                             "already, so the loader must not be sharded again (accelerate's prepare with several "
                             "processes does that): build it with hydraulis.integrations.hf.balanced_train_dataloader "
                             "or prepare it with num_processes=1")

    def set_epoch(self, epoch: int) -> None:
        """Start ``epoch`` from its first micro-batch (as ``DistributedSampler.set_epoch``)."""
        require_int(epoch, "epoch", minimum=0)
        if epoch != self.epoch:
            self.epoch, self.done = epoch, 0

    def global_batches(self) -> list[np.ndarray]:
        """This epoch's global batches: its shuffle (seeded by seed and epoch) cut into runs of
        ``batch_size`` dataset indices, a last shorter run dropped."""
        order = np.random.default_rng([self.seed, self.epoch]).permutation(self.lengths.size)
        size = self.global_batch_size
        return [order[i:i + size] for i in range(0, order.size - size + 1, size)]

    def plans(self) -> list[RankMicroBatches]:
        """Every global batch's plan of this epoch (all ranks), computed once per epoch."""
        if self._plans is None or self._plans[0] != self.epoch:
            plans = [tuple(tuple(tuple(int(batch[k]) for k in mb) for mb in rank)
                           for rank in rank_micro_batches(self.lengths[batch], self.num_replicas, self.time,
                                                          self.max_tokens, self.micro_batches))
                     for batch in self.global_batches()]
            self._plans = (self.epoch, plans)
            log.info("epoch %d: %d global batches, %d micro-batches per rank", self.epoch, len(plans), len(self))
        return self._plans[1]

    def __iter__(self) -> Iterator[list[int]]:
        mine = [list(mb) for plan in self.plans() for mb in plan[self.rank]]
        while self.done < len(mine):
            self.done += 1
            yield mine[self.done - 1]
        self.done = 0

    def __len__(self) -> int:
        return sum(len(plan[self.rank]) for plan in self.plans())

    def state_dict(self) -> dict[str, int]:
        """Where this rank stands: epoch, micro-batches yielded in it, seed."""
        return {"epoch": self.epoch, "done": self.done, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume where :meth:`state_dict` was taken (the same lengths, batch size and ranks)."""
        require(state.get("seed") == self.seed, "state.seed", state.get("seed"), f"must be this sampler's {self.seed}")
        self.epoch = require_int(state.get("epoch"), "state.epoch", minimum=0)
        self.done = require_int(state.get("done"), "state.done", minimum=0)
