"""Measuring one rank's activation memory in one CPU process, at any tp, cp or sp.

* :class:`ShapeGroup` — a process group whose collectives give the right shapes (all-gather
  repeats, reduce-scatter cuts, all-reduce keeps): one rank of a tp or cp group without the
  other ranks. Values are meaningless; the bytes are the runtime's.
* :func:`flash_core` — the attention core replaced by one that keeps for its backward exactly
  what FlashAttention keeps (Q, K, V, the output, the log-sum-exp; Dao 2023), so the CPU
  measures what a CUDA rank keeps around it.
* :class:`LiveBytes` — the runtime's own count of live tensor storage
  (:mod:`hydraulis.runtime.memory.peak`), re-exported here;
* :class:`MetaLiveBytes` — the same on the ``meta`` device, as the CUDA allocator counts it.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from hydraulis.runtime.memory.peak import LiveBytes
from hydraulis.runtime.model import decoder
from hydraulis.runtime.parallel.group import ParallelGroup

__all__ = ["LiveBytes", "MetaLiveBytes", "ShapeGroup", "flash_core"]


class ShapeGroup(ParallelGroup):
    """The collectives complete at once (``work`` None); the synchronous ones are built on them."""

    def all_reduce_start(self, tensor, op=None):
        return tensor, None

    def all_gather_start(self, tensor):
        return (tensor if self.trivial else torch.cat([tensor] * self.size)), None

    def reduce_scatter_start(self, tensor):
        return (tensor if self.trivial else tensor.chunk(self.size)[0].clone()), None


class _FlashCore(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, attend):
        with torch.no_grad():
            out = attend(q, k, v)
        ctx.save_for_backward(q, k, v, out, torch.zeros(q.shape[1], q.shape[0], dtype=torch.float32))
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, _, _ = ctx.saved_tensors
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v), None


@contextmanager
def flash_core():
    """The runtime's attention core keeping what FlashAttention keeps (module docstring)."""
    attention = decoder.packed_attention

    def core(q, k, v, *args, **kwargs):
        return _FlashCore.apply(q, k, v, lambda *qkv: attention(*qkv, *args, **kwargs))

    with mock.patch.object(decoder, "packed_attention", core):
        yield


class MetaLiveBytes(TorchDispatchMode):
    """Live bytes of every storage an operation creates on the ``meta`` device until it is freed,
    each rounded up to the CUDA caching allocator's 512-byte blocks (storages are told apart by
    identity: meta storages have no addresses); ``live`` now, ``peak`` so far."""

    BLOCK = 512

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen: set[int] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage()._cdata for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                key = storage._cdata
                if key in inputs or key in self._seen:
                    continue
                size = -(-storage.nbytes() // self.BLOCK) * self.BLOCK
                self._seen.add(key)
                self.live += size
                weakref.finalize(storage, self._free, size, key)
        self.peak = max(self.peak, self.live)
        return out

    def _free(self, size: int, key: int) -> None:
        self.live -= size
        self._seen.discard(key)
