"""A rank's gradients across the micro-batches of one step, accumulated in fp32.

Each micro-batch's backward leaves the gradient of every compute shard in ``param.grad``, in
the compute dtype. Under a compute dtype narrower than fp32 every parameter gets an fp32 **main
gradient** buffer, and a hook adds each micro-batch's gradient to it and frees it::

    main_p ← main_p + fp32(grad_p(micro-batch j)),    j = 1 … v;   grad_p ← None

Why, readiness, memory and one owner: :class:`GradientBuffers`; the reduction that then sends
these gradients to the optimizer layout: :mod:`hydraulis.runtime.optimizer.exchange`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import torch


class GradientBuffers:
    """The step's accumulated gradients of ``params`` (fp32 main buffers when ``fp32_main``).

    Each micro-batch's backward leaves the gradient of every compute shard in ``param.grad``, in
    the compute dtype. Summing ``v`` micro-batches there in bf16 would round every partial sum to
    8 significant bits — a relative error growing like ``v·2⁻⁹`` that no later fp32 arithmetic can
    undo. So under a compute dtype narrower than fp32 every parameter gets an fp32 **main
    gradient** buffer, and a hook that runs as soon as autograd has accumulated the parameter's
    gradient of a micro-batch (``register_post_accumulate_grad_hook``) adds it to the buffer and
    frees it::

        main_p ← main_p + fp32(grad_p(micro-batch j)),    j = 1 … v;   grad_p ← None

    (the bf16 gradient of one micro-batch is rounded once, the sum never is). In fp32 compute the
    gradient accumulates in ``param.grad`` itself, already fp32.

    **Readiness.** The same hook counts, per parameter, the backwards that reached it. Armed for a
    step of ``v`` micro-batches with the parameters' buckets (:meth:`GradientBuffers.arm`), it
    reports a bucket as soon as every parameter in it has been accumulated ``v`` times — the last
    micro-batch's backward has produced it — so that its exchange can start while the backward
    goes on (:class:`~hydraulis.runtime.optimizer.exchange.Reduction`).

    The reduction (:mod:`hydraulis.runtime.optimizer.exchange`) then sends these gradients to the
    optimizer layout in ``grad_reduce_dtype`` (:class:`~hydraulis.sharding.kinds.ReduceDtype`) — fp32
    on the CPU, bf16 on CUDA by default, or either when asked, bf16 halving the bytes at the price
    of one more rounding per rank — and the owners sum them in their fp32 buffers.

    Memory: 4 bytes per compute-shard element for the main gradients (allocated at the first
    backward of the strategy's first step, freed when the strategy is switched away from), plus
    transiently one parameter's gradient of one micro-batch in the compute dtype.

    **One owner** (:mod:`hydraulis.runtime.optimizer.routes`): where the rank owns exactly what it
    computes and each shard is one contiguous run of its optimizer buffer, the main gradients are
    views of the optimizer's own fp32 gradient (:meth:`GradientBuffers.alias`) — no buffers of their
    own and nothing to copy: the first micro-batch's gradient is copied in, the others added, and a
    parameter no backward reached is zeroed (:meth:`GradientBuffers.settle`).
    """

    def __init__(self, params: Sequence[torch.nn.Parameter], fp32_main: bool) -> None:
        self.params = list(params)
        self.main: list[torch.Tensor | None] = [None] * len(self.params)
        for index, param in enumerate(self.params):
            param.register_post_accumulate_grad_hook(self._accumulator(index))
        self.fp32_main = fp32_main
        self.counts = [0] * len(self.params)
        self.expected = 0
        self.buckets: tuple[int, ...] = ()
        self.missing: dict[int, int] = {}
        self.on_ready: Callable[[int], None] | None = None
        self.aliased = False

    def alias(self, views: Sequence[torch.Tensor]) -> None:
        """Accumulate into ``views`` (fp32, one per parameter, its shape) instead of buffers of
        their own (:class:`GradientBuffers`: one owner)."""
        self.main, self.aliased = list(views), True

    def settle(self) -> None:
        """The step's backwards are done: an aliased buffer no backward reached is zeroed (the
        others hold this step's sum)."""
        for main, count in zip(self.main, self.counts):
            if count == 0:
                main.zero_()

    def arm(self, backwards: int, buckets: tuple[int, ...], on_ready: Callable[[int], None]) -> None:
        """Call ``on_ready(bucket)`` once every parameter of ``bucket`` (``buckets[i]``: the
        bucket of parameter ``i``) has been accumulated ``backwards`` times."""
        self.expected, self.buckets, self.on_ready = backwards, buckets, on_ready
        self.missing = dict(Counter(buckets))

    def grads(self) -> list[torch.Tensor | None]:
        """Every parameter's gradient summed over the step's micro-batches (None: none arrived)."""
        return list(self.main) if self.fp32_main else [param.grad for param in self.params]

    def clear(self) -> None:
        """Start the next step: the main buffers zeroed (kept allocated; aliased ones are
        overwritten by the next first backward instead), ``param.grad`` dropped."""
        for main in self.main if not self.aliased else ():
            if main is not None:
                main.zero_()
        for param in self.params:
            param.grad = None
        self.counts = [0] * len(self.params)
        self.on_ready = None

    def release(self) -> None:
        """Free the main buffers (the strategy is switched away from)."""
        self.main, self.aliased = [None] * len(self.params), False

    def _accumulator(self, index: int):
        def accumulate(param: torch.nn.Parameter) -> None:
            if self.fp32_main:
                if self.main[index] is None:
                    self.main[index] = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
                if self.aliased and self.counts[index] == 0:
                    self.main[index].copy_(param.grad)
                else:
                    self.main[index].add_(param.grad)
                param.grad = None
            self.counts[index] += 1
            if self.on_ready is not None and self.counts[index] == self.expected:
                bucket = self.buckets[index]
                self.missing[bucket] -= 1
                if self.missing[bucket] == 0:
                    self.on_ready(bucket)

        return accumulate
