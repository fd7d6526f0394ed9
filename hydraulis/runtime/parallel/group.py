"""A process group together with this rank's place in it.

Parallel layers take a :class:`ParallelGroup` rather than a raw ``ProcessGroup`` so that the
same code runs a single device (``ParallelGroup.single()``: every collective is the identity and
``torch.distributed`` need not be initialised) and a sharded layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class ParallelGroup:
    """``group`` is a ``torch.distributed`` process group of ``size`` ranks (None when size 1);
    ``rank`` is this process's index in it."""

    group: Any
    size: int
    rank: int

    @classmethod
    def single(cls) -> ParallelGroup:
        return cls(None, 1, 0)

    @property
    def trivial(self) -> bool:
        return self.size == 1

    def all_reduce(self, tensor: torch.Tensor, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """In place; returns ``tensor``."""
        return finished(*self.all_reduce_start(tensor, op))

    def all_reduce_start(self, tensor: torch.Tensor,
                         op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> tuple[torch.Tensor, Any]:
        """:meth:`all_reduce` started asynchronously: ``tensor``, to be read after ``work.wait()``
        (:func:`finished`; ``work`` None on a single rank: the result is ready)."""
        if self.trivial:
            return tensor, None
        return tensor, dist.all_reduce(tensor, op=op, group=self.group, async_op=True)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank-major concatenation along dim 0 of every rank's equally shaped ``tensor``."""
        return finished(*self.all_gather_start(tensor))

    def all_gather_start(self, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """:meth:`all_gather` started asynchronously: the output buffer and its ``work``, as
        :meth:`all_reduce_start`."""
        if self.trivial:
            return tensor, None
        tensor = tensor.contiguous()
        out = tensor.new_empty((self.size * tensor.shape[0], *tensor.shape[1:]))
        return out, _all_gather_single(out, tensor, group=self.group, async_op=True)

    def broadcast(self, tensor: torch.Tensor, source: int = 0) -> torch.Tensor:
        """In place: every rank's ``tensor`` becomes rank ``source``'s; returns ``tensor``."""
        if not self.trivial:
            dist.broadcast(tensor, source, group=self.group)
        return tensor

    def all_to_all(self, tensor: torch.Tensor, output_splits: list[int], input_splits: list[int]) -> torch.Tensor:
        """Rank ``i`` receives ``output_splits[j]`` rows from every rank ``j`` (source-major) and
        sends ``input_splits[i]`` consecutive rows of ``tensor`` to every rank ``i``."""
        return finished(*self.all_to_all_start(tensor, output_splits, input_splits))

    def all_to_all_start(self, tensor: torch.Tensor, output_splits: list[int],
                         input_splits: list[int]) -> tuple[torch.Tensor, Any]:
        """:meth:`all_to_all` started asynchronously: the output buffer, to be read after
        ``work.wait()`` (``work`` None on a single rank: the output is ready)."""
        if self.trivial:
            return tensor.clone(), None
        out = tensor.new_empty((sum(output_splits), *tensor.shape[1:]))
        work = dist.all_to_all_single(out, tensor.contiguous(), output_splits, input_splits, group=self.group,
                                      async_op=True)
        return out, work

    def reduce_scatter(self, tensor: torch.Tensor) -> torch.Tensor:
        """The sum over ranks of ``tensor``, this rank's block of dim 0 (``1/size`` of it)."""
        return finished(*self.reduce_scatter_start(tensor))

    def reduce_scatter_start(self, tensor: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """:meth:`reduce_scatter` started asynchronously: the output buffer and its ``work``, as
        :meth:`all_reduce_start`."""
        if self.trivial:
            return tensor, None
        tensor = tensor.contiguous()
        out = tensor.new_empty((tensor.shape[0] // self.size, *tensor.shape[1:]))
        return out, _reduce_scatter_single(out, tensor, group=self.group, async_op=True)


def finished(tensor: torch.Tensor, work: Any) -> torch.Tensor:
    """``tensor`` once the collective ``work`` that writes it is complete (None: already is). On
    CUDA the wait is the current stream's, not the host's."""
    if work is not None:
        work.wait()
    return tensor


class _Conjugate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, forward: Callable, backward: Callable) -> torch.Tensor:
        ctx.backward_op = backward
        return forward(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.backward_op(grad), None, None


def conjugate(x: torch.Tensor, forward: Callable[[torch.Tensor], torch.Tensor],
              backward: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``forward(x)``, whose gradient is ``backward(grad)``: a collective and its adjoint
    (identity ↔ all-reduce, all-gather ↔ reduce-scatter)."""
    return _Conjugate.apply(x, forward, backward)


_all_gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
