"""Pipeline parallelism: one stage's 1F1B schedule over micro-batches of different lengths.

Stage ``s`` of ``p`` runs ``w = min(p − 1 − s, v)`` warm-up forwards, then alternates one
forward and one backward, then drains the remaining ``w`` backwards (PipeDream-Flush,
Narayanan et al. 2021) — the order :func:`hydraulis.cost.simulate_1f1b` predicts. Micro-batch
``j`` of stage ``s`` is ``T_j`` tokens (per cp rank) × ``H``; ``T_j`` differs between
micro-batches, so every hand-off first sends the tensor's **shape** (a fixed-size int64 header),
then the tensor: a receiver allocates from the header and checks it against its own plan, and
a disagreement is an error instead of a silent mis-read.

Deadlock freedom: a send may not complete before its receive is posted (NCCL; gloo too for
large messages), so sends are never waited for alone while the peer waits for something else.
As in Megatron-LM's non-interleaved schedule, the steady state pairs each send with the
receive the stage needs next — forward output sent with the matching output gradient
received (``send_forward_recv_backward``), input gradient sent with the next input received
(``send_backward_recv_forward``) — each pair posted together with ``batch_isend_irecv``.
Neighbouring stages post the pairs in the same order, so every posted send meets its receive.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.packing import PackedMicroBatch

MAX_DIMS = 4


class StageLink:
    """Point-to-point hand-offs of one rank to the same cp/tp position of the previous and
    next stage (world ranks; None at the pipeline's ends)."""

    def __init__(self, previous: int | None, following: int | None, device: torch.device, dtype: torch.dtype) -> None:
        self.previous, self.following, self.device, self.dtype = previous, following, device, dtype

    def recv_forward(self) -> torch.Tensor | None:
        return None if self.previous is None else self._exchange([], [self.previous])[0]

    def send_forward(self, activation: torch.Tensor | None) -> None:
        if self.following is not None:
            self._exchange([(activation, self.following)], [])

    def recv_backward(self) -> torch.Tensor | None:
        return None if self.following is None else self._exchange([], [self.following])[0]

    def send_backward(self, grad: torch.Tensor | None) -> None:
        if self.previous is not None:
            self._exchange([(grad, self.previous)], [])

    def send_forward_recv_backward(self, activation: torch.Tensor | None) -> torch.Tensor | None:
        if self.following is None:
            return None
        return self._exchange([(activation, self.following)], [self.following])[0]

    def send_backward_recv_forward(self, grad: torch.Tensor | None) -> torch.Tensor | None:
        if self.previous is None:
            return None
        return self._exchange([(grad, self.previous)], [self.previous])[0]

    def _exchange(self, sends: list[tuple[torch.Tensor, int]], recvs: list[int]) -> list[torch.Tensor]:
        """Headers first, then payloads; each round posted as one batch."""
        headers = [self._header(tensor) for tensor, _ in sends]
        incoming = [torch.zeros(MAX_DIMS + 1, dtype=torch.long, device=self.device) for _ in recvs]
        _post([(h, peer) for h, (_, peer) in zip(headers, sends)], list(zip(incoming, recvs)))
        buffers = [torch.empty(tuple(h[1:1 + int(h[0])].tolist()), dtype=self.dtype, device=self.device)
                   for h in incoming]
        _post([(t.contiguous(), peer) for t, peer in sends], list(zip(buffers, recvs)))
        return buffers

    def _header(self, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.dim() > MAX_DIMS:
            raise ValueError(f"cannot send a {tensor.dim()}-dimensional tensor (at most {MAX_DIMS})")
        shape = list(tensor.shape) + [0] * (MAX_DIMS - tensor.dim())
        return torch.tensor([tensor.dim(), *shape], dtype=torch.long, device=self.device)


def _post(sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]]) -> None:
    ops = [dist.P2POp(dist.isend, t, peer) for t, peer in sends]
    ops += [dist.P2POp(dist.irecv, t, peer) for t, peer in recvs]
    for request in dist.batch_isend_irecv(ops):
        request.wait()


class StageWork:
    """Forward and backward of one stage's micro-batches; keeps each micro-batch's input and
    output until its backward. On the last stage the output is the micro-batch's part of the
    normalised loss (:func:`hydraulis.runtime.model.loss.part_loss`), summed into ``loss``."""

    def __init__(self, model: StageModel, batches: Sequence[PackedMicroBatch], loss_tokens: int) -> None:
        self.model, self.batches, self.loss_tokens = model, batches, loss_tokens
        self.saved: dict[int, tuple[torch.Tensor | None, torch.Tensor]] = {}
        self.loss = 0.0

    def forward(self, j: int, received: torch.Tensor | None) -> torch.Tensor | None:
        """Run micro-batch ``j``; the activation to send on (None on the last stage)."""
        if not self.model.first:
            expected = (self.batches[j].hidden_rows, self.model.model.hidden)
            if tuple(received.shape) != expected:
                raise RuntimeError(f"micro-batch {j}: received activations of shape {tuple(received.shape)}, "
                                   f"the plan says {expected}; the stages disagree on the step plan")
            received.requires_grad_(True)
        out = self.model(received, self.batches[j])
        if self.model.last:
            out = part_loss(out, self.loss_tokens)
            self.loss += float(out.detach())
        self.saved[j] = (received, out)
        return None if self.model.last else out.detach()

    def backward(self, j: int, grad: torch.Tensor | None) -> torch.Tensor | None:
        """Back-propagate micro-batch ``j``; the input gradient to send back (None on stage 0)."""
        received, out = self.saved.pop(j)
        if self.model.last:
            out.backward()
        else:
            if grad is None or grad.shape != out.shape:
                raise RuntimeError(f"micro-batch {j}: received a gradient of shape "
                                   f"{None if grad is None else tuple(grad.shape)} for an output of {tuple(out.shape)}")
            torch.autograd.backward(out, grad)
        return None if self.model.first else received.grad


def run_1f1b(work: StageWork, link: StageLink, micro_batches: int, pp: int, stage: int) -> None:
    """The 1F1B schedule of ``stage`` (module docstring), micro-batches in plan order."""
    warmup = min(pp - 1 - stage, micro_batches)
    steady = micro_batches - warmup
    for j in range(warmup):
        link.send_forward(work.forward(j, link.recv_forward()))
    received = link.recv_forward() if steady else None
    for i in range(steady):
        grad = link.send_forward_recv_backward(work.forward(warmup + i, received))
        input_grad = work.backward(i, grad)
        if i == steady - 1:
            link.send_backward(input_grad)
        else:
            received = link.send_backward_recv_forward(input_grad)
    for i in range(steady, micro_batches):
        link.send_backward(work.backward(i, link.recv_backward()))
