"""Context parallelism without dense masks: balanced work per rank, and no tensor near T² in size."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from hydraulis.base.types import MicroBatch
from hydraulis.runtime.model.attention import KernelKind, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup

CPU = torch.device("cpu")
LENGTHS = (5000, 1300, 700, 260, 37, 9)


def _micro_batch(cp: int, rank: int, kernel: KernelKind):
    documents = [torch.arange(s + 1) % 100 for s in LENGTHS]
    return pack_micro_batch(documents, MicroBatch(tuple(range(len(LENGTHS))), LENGTHS), 1, ParallelGroup(None, cp, rank),
                            CPU, kernel)


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_every_rank_computes_the_same_attention_work_within_ten_percent(cp):
    work = [_micro_batch(cp, rank, KernelKind.CPU_FLASH).attention.work for rank in range(cp)]
    mean = sum(work) / cp
    assert max(abs(w - mean) for w in work) <= 0.1 * mean, work


class _LargestAllocation(TorchDispatchMode):
    """The most elements of any tensor an operation returns while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.largest = max(self.largest, tensor.numel())
        return out


@pytest.mark.parametrize("kernel", [KernelKind.CPU_FLASH, KernelKind.MATH])
def test_no_tensor_of_more_than_t_squared_over_8_cp_elements(kernel):
    cp, heads, kv_heads, dim = 2, 2, 1, 8
    largest = 0
    for rank in range(cp):
        with _LargestAllocation() as mode:
            batch = _micro_batch(cp, rank, kernel)
            total = int(batch.cu_seqlens[-1])
            generator = torch.Generator().manual_seed(rank)
            q = torch.randn(total // cp, heads, dim, generator=generator, requires_grad=True)
            k, v = (torch.randn(total, kv_heads, dim, generator=generator, requires_grad=True) for _ in range(2))
            packed_attention(q, k, v, batch.attention, kernel).sum().backward()
        largest = max(largest, mode.largest)
    assert largest <= total ** 2 / (8 * cp), (largest, total)
    assert largest >= total * heads * dim / cp
