"""``BalancedTrainer``: the Hugging Face ``Trainer`` with every global batch dealt to the ranks by
predicted time (:class:`~hydraulis.integrations.torch.BalancedBatchSampler`; docs/integrations.md).

The loader yields one item per global batch: this rank's share as a :class:`RankShare`, its
micro-batches collated (packed into at most ``max_tokens`` tokens each, the same number ``v``
on every rank, ``v`` varying from batch to batch). :meth:`BalancedTrainer.training_step` runs
them all, the gradients synchronised only after the last, each micro-batch's loss normalised by
the global batch's label tokens (gathered over the ranks, as the ``Trainer`` counts them), so a
step's gradient is that of the mean loss over the global batch however it was split.
``gradient_accumulation_steps = g`` accumulates ``g`` global batches per optimizer step, each
weighted equally. The sampler refuses accelerate's re-sharding (its ``batch_size`` raises):
this loader is prepared for one process, the share being this rank's already.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from torch.utils.data import DataLoader, Dataset
from transformers import Trainer

from hydraulis.base.errors import require
from hydraulis.integrations.torch import BalancedBatchSampler


class RankShare(list):
    """This rank's collated micro-batches of one global batch, in running order."""


class BalancedTrainer(Trainer):
    """A ``Trainer`` whose training loader is :func:`balanced_train_dataloader` of ``sampler``."""

    def __init__(self, *args: Any, sampler: BalancedBatchSampler, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        require(sampler.num_replicas == self.args.world_size, "sampler.num_replicas", sampler.num_replicas,
                f"must be the Trainer's world size {self.args.world_size}")
        require(sampler.rank == self.args.process_index, "sampler.rank", sampler.rank,
                f"must be this process's index {self.args.process_index}")
        self.sampler = sampler

    def get_train_dataloader(self) -> DataLoader:
        return balanced_train_dataloader(self.train_dataset, self.sampler, self.data_collator, self.args.device)

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        """Every micro-batch of the share (module docstring); the share's summed loss."""
        if not isinstance(inputs, RankShare):
            return super().training_step(model, inputs, num_items_in_batch)
        outer = self.current_gradient_accumulation_steps
        items = self._get_num_items_in_batch(list(inputs), self.args.device)
        if items is not None:
            items = items * outer
        self.current_gradient_accumulation_steps = outer * len(inputs)
        total = None
        try:
            for j, micro_batch in enumerate(inputs):
                last = j == len(inputs) - 1
                hold = contextlib.nullcontext if last else functools.partial(self.accelerator.no_sync, model=model)
                with hold():
                    loss = super().training_step(model, micro_batch, items)
                total = loss if total is None else total + loss
        finally:
            self.current_gradient_accumulation_steps = outer
        return total

    def floating_point_ops(self, inputs: Any) -> int:
        if isinstance(inputs, RankShare):
            return sum(super(BalancedTrainer, self).floating_point_ops(mb) for mb in inputs)
        return super().floating_point_ops(inputs)

    def _track_num_input_tokens(self, inputs: Any) -> None:
        for micro_batch in inputs if isinstance(inputs, RankShare) else [inputs]:
            super()._track_num_input_tokens(micro_batch)


def balanced_train_dataloader(dataset: Dataset, sampler: BalancedBatchSampler, collate_fn: Any,
                              device: Any) -> DataLoader:
    """One item per global batch, this rank's :class:`RankShare`, prepared as the ``Trainer``
    prepares its own loader (accelerate's ``DataLoaderShard``: batches on ``device``, the
    end of the epoch tracked) for one process: the share is this rank's already."""
    from accelerate.data_loader import prepare_data_loader

    shares = _Shares(dataset, sampler, collate_fn)
    loader = DataLoader(shares, batch_size=None, shuffle=False, collate_fn=_as_is)
    return prepare_data_loader(loader, device, num_processes=1, process_index=0, put_on_device=True)


class _Shares(Dataset):
    """``shares[k]``: this rank's micro-batches of the epoch's global batch ``k``, collated."""

    def __init__(self, dataset: Dataset, sampler: BalancedBatchSampler, collate_fn: Any) -> None:
        self.dataset, self.sampler, self.collate_fn = dataset, sampler, collate_fn

    def __getitem__(self, k: int) -> RankShare:
        plan = self.sampler.plans()[k][self.sampler.rank]
        return RankShare(self.collate_fn([self.dataset[i] for i in mb]) for mb in plan)

    def __len__(self) -> int:
        return len(self.sampler.plans())

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)


def _as_is(item: Any) -> Any:
    return item
