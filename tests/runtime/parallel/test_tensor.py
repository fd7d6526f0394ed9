"""The vocabulary-parallel cross-entropy communicates twice per micro-batch: the max, then the
target and the sum-exp stacked in one all-reduce (its values: ``test_async_distributed.py``)."""

import torch

from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.parallel.tensor import vocab_parallel_cross_entropy

TOKENS, VOCAB_SHARD = 7, 5


class _CountingGroup(ParallelGroup):
    """Rank 0 of 2 whose all-reduces complete at once, each noted in ``started``."""

    started: list[tuple[int, ...]] = []

    def all_reduce_start(self, tensor, op=None):
        self.started.append(tuple(tensor.shape))
        return tensor, None


def test_the_cross_entropy_all_reduces_twice_per_micro_batch():
    logits = torch.randn(TOKENS, VOCAB_SHARD, requires_grad=True)
    labels = torch.arange(TOKENS)
    loss = vocab_parallel_cross_entropy(logits, labels, _CountingGroup(None, 2, 0), 0)
    loss.sum().backward()
    assert _CountingGroup.started == [(TOKENS,), (2, TOKENS)]
