"""A rank's gradients across the micro-batches of one step, accumulated in fp32.

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

The reduction (:meth:`~hydraulis.runtime.optimizer.routes.Route.reduce`) then sends these
gradients to the optimizer layout in ``grad_reduce_dtype`` (:class:`~hydraulis.layout.kinds.ReduceDtype`) —
fp32 by default, or bf16 to halve the bytes at the price of one more rounding per rank — and the
owners sum them in their fp32 buffers.

Memory: 4 bytes per compute-shard element for the main gradients (allocated at the first
backward of the strategy's first step, freed when the strategy is switched away from), plus
transiently one parameter's gradient of one micro-batch in the compute dtype.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class GradientBuffers:
    """The step's accumulated gradients of ``params`` (fp32 main buffers when ``fp32_main``)."""

    def __init__(self, params: Sequence[torch.nn.Parameter], fp32_main: bool) -> None:
        self.params = list(params)
        self.main: list[torch.Tensor | None] = [None] * len(self.params)
        if fp32_main:
            for index, param in enumerate(self.params):
                param.register_post_accumulate_grad_hook(self._accumulator(index))
        self.fp32_main = fp32_main

    def grads(self) -> list[torch.Tensor | None]:
        """Every parameter's gradient summed over the step's micro-batches (None: none arrived)."""
        return list(self.main) if self.fp32_main else [param.grad for param in self.params]

    def clear(self) -> None:
        """Start the next step: the main buffers zeroed (kept allocated), ``param.grad`` dropped."""
        for main in self.main:
            if main is not None:
                main.zero_()
        for param in self.params:
            param.grad = None

    def release(self) -> None:
        """Free the main buffers (the strategy is switched away from)."""
        self.main = [None] * len(self.params)

    def _accumulator(self, index: int):
        def accumulate(param: torch.nn.Parameter) -> None:
            if self.main[index] is None:
                self.main[index] = torch.zeros(param.shape, dtype=torch.float32, device=param.device)
            self.main[index].add_(param.grad)
            param.grad = None

        return accumulate
