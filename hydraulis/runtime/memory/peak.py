"""A rank's measured peak memory in a step, and the device memory budget it must stay within.

``hydraulis train --device-memory BYTES`` gives every process a budget ``M``; after each step
every rank knows every rank's peak (it travels in the step's one all-gather) and, when one is
above ``M``, every rank raises the same error naming the step, the rank and the bytes — no rank
is left waiting in a collective for a peer that stopped.

The details: :class:`PeakMemory`."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from hydraulis.base.errors import HydraulisError


class LiveBytes(TorchDispatchMode):
    """Counts the bytes of every storage an operation creates until it is freed: ``live`` now,
    ``peak`` so far (:class:`PeakMemory`)."""

    def __init__(self) -> None:
        super().__init__()
        self._storages = WeakIdKeyDictionary()
        self.live = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                if storage not in self._storages and storage.data_ptr() not in inputs:
                    self._storages[storage] = storage.nbytes()
                    self.live += storage.nbytes()
                    weakref.finalize(storage, self._free, storage.nbytes())
        self.peak = max(self.peak, self.live)
        return out

    def _free(self, nbytes: int) -> None:
        self.live -= nbytes


class PeakMemory:
    """One step's peak bytes on one rank (:class:`PeakMemory`): ``with meter.step(held):`` around
    the step, then ``meter.peak``.

    How the peak is measured:

    * **CPU** — the runtime's own count of tensor storage, not the process's resident size. A CPU
      process holds the interpreter, torch's libraries and allocator caches (hundreds of MB that
      vary from run to run and that glibc returns late), so its RSS cannot tell whether a step's
      tensors fit a budget of a few MB. Instead::

          peak = held + max over the step of live

      ``held``: the bytes of the tensors the rank keeps across steps, counted when the step starts
      (its compute weights, its gradient buffers, its optimizer buffer: master weights, moments,
      reduced gradients); ``live``: every storage an operation creates during the step (a
      ``TorchDispatchMode`` sees each operation, its forward, backward, communication and the
      optimizer's), counted from its creation until it is freed (``weakref.finalize`` on the
      storage). Views and in-place results, which share an input's storage, are not new storage.
      The count is exact for tensor bytes; it adds Python work to every operation (:class:`LiveBytes`).
    * **CUDA** — the caching allocator's own statistic, ``torch.cuda.max_memory_allocated`` since
      the step began (reset at its start); it already holds the rank's kept tensors.

    Worked example: a rank holding 4.2 MB of states whose step peaks at 30.1 MB of new storage has
    ``peak = 34.3 MB``; under ``--device-memory 32000000`` step 3 fails on every rank with
    ``device_memory: 32000000 is exceeded at step 3 by rank 1: peak 34300000 bytes (held 4200000 +
    step 30100000)``.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.held = self.peak = 0
        self._live: LiveBytes | None = None

    def step(self, held: Iterable[torch.Tensor | None]) -> AbstractContextManager:
        """Measure a step; ``held``: the tensors the rank keeps across steps (CPU only)."""
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            return nullcontext()
        self.held = sum(t.untyped_storage().nbytes() for t in _distinct(held))
        self._live = LiveBytes()
        return self._live

    @property
    def peak_bytes(self) -> int:
        if self.cuda:
            return int(torch.cuda.max_memory_allocated())
        return self.held + (self._live.peak if self._live else 0)


def check_budget(budget: int, step: int, peaks: list[int], held: list[int]) -> None:
    """Raise, naming ``step``, the rank and its bytes, when the most loaded rank's peak exceeds
    ``budget`` (``peaks`` and ``held`` indexed by rank)."""
    rank = max(range(len(peaks)), key=lambda r: peaks[r])
    if peaks[rank] > budget:
        raise HydraulisError("device_memory", budget,
                             f"is exceeded at step {step} by rank {rank}: peak {peaks[rank]} bytes "
                             f"(held {held[rank]} + step {peaks[rank] - held[rank]})")


def _distinct(tensors: Iterable[torch.Tensor | None]) -> list[torch.Tensor]:
    """``tensors`` with one per storage (a flat buffer and its views count once)."""
    seen: dict[int, torch.Tensor] = {}
    for tensor in tensors:
        if tensor is not None and tensor.numel() > 0:
            seen.setdefault(tensor.untyped_storage().data_ptr(), tensor)
    return list(seen.values())
