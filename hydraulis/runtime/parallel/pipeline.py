"""Pipeline parallelism: one stage's 1F1B schedule over micro-batches of different lengths.

Stage ``s`` of ``p`` runs ``w = min(p − 1 − s, v)`` warm-up forwards, then alternates one
forward and one backward, then drains the remaining ``w`` backwards (PipeDream-Flush,
Narayanan et al. 2021) — the one order of :func:`hydraulis.cost.order.one_f_one_b`, which
:func:`hydraulis.cost.simulate_1f1b` prices. The order is a list of operations computed from
the plan, then executed
(:func:`run_schedule`), so it can be read, logged or checked before anything runs. Worked
example, ``p = 2, v = 3``: stage 0 runs ``F0 F1 B0 F2 B1 B2``, stage 1 ``F0 B0 F1 B1 F2 B2``.

The hand-offs' shapes: :class:`StageLink`; deadlock freedom and stages of different tensor-parallel
degree: :func:`run_schedule`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from hydraulis.cost.order import Operation, Phase, one_f_one_b
from hydraulis.runtime.model.decoder import StageModel
from hydraulis.runtime.model.loss import part_loss
from hydraulis.runtime.model.packing import PackedMicroBatch
from hydraulis.runtime.rank_map import HandOff

Shape = tuple[int, ...]


class StageLink:
    """Point-to-point hand-offs of one rank to the previous and next stage of its pipeline, with
    the world ranks of its :class:`~hydraulis.runtime.rank_map.HandOff` (the same cp/tp position
    when the stages' tp is equal); receive buffers are allocated from the shapes the caller knows.

    Micro-batch ``j`` of stage ``s`` hands on ``T_j/sp`` rows × ``H`` (its tokens per cp rank,
    divided among the tp ranks under sequence parallelism); ``T_j`` differs between micro-batches,
    and every rank knows every ``T_j`` from the step plan broadcast to all ranks, so a receiver
    allocates its buffer from its own plan: no shape travels, and the host never waits for the
    device to learn one. Waiting for a hand-off is the stream's on CUDA (NCCL's ``wait``), the
    host's only with gloo.
    """

    def __init__(self, peers: HandOff, device: torch.device, dtype: torch.dtype) -> None:
        self.peers, self.device, self.dtype = peers, device, dtype

    def recv_forward(self, shape: Shape) -> torch.Tensor | None:
        return self._receive([], self.peers.previous, shape)

    def send_forward(self, activation: torch.Tensor | None) -> None:
        self._exchange([(activation, peer) for peer in self.peers.to_following], [])

    def recv_backward(self, shape: Shape) -> torch.Tensor | None:
        return self._receive([], self.peers.following, shape)

    def send_backward(self, grad: torch.Tensor | None) -> None:
        self._exchange([(grad, peer) for peer in self.peers.to_previous], [])

    def send_forward_recv_backward(self, activation: torch.Tensor | None, shape: Shape) -> torch.Tensor | None:
        return self._receive([(activation, peer) for peer in self.peers.to_following], self.peers.following, shape)

    def send_backward_recv_forward(self, grad: torch.Tensor | None, shape: Shape) -> torch.Tensor | None:
        return self._receive([(grad, peer) for peer in self.peers.to_previous], self.peers.previous, shape)

    def _receive(self, sends: list[tuple[torch.Tensor, int]], peer: int | None, shape: Shape) -> torch.Tensor | None:
        """``sends`` with the receive of a ``shape`` buffer from ``peer`` in one batch (None: sends
        alone, at the pipeline's end, where there is nothing to send either)."""
        if peer is None:
            self._exchange(sends, [])
            return None
        return self._exchange(sends, [(peer, shape)])[0]

    def _exchange(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[int, Shape]]) -> list[torch.Tensor]:
        """One batch of sends and receives into buffers of the given shapes (none: nothing runs)."""
        buffers = [torch.empty(shape, dtype=self.dtype, device=self.device) for _, shape in recvs]
        ops = [dist.P2POp(dist.isend, tensor.contiguous(), peer) for tensor, peer in sends]
        ops += [dist.P2POp(dist.irecv, buffer, peer) for buffer, (peer, _) in zip(buffers, recvs)]
        if ops:
            for request in dist.batch_isend_irecv(ops):
                request.wait()
        return buffers


class StageWork:
    """Forward and backward of one stage's micro-batches. Micro-batch ``j`` is packed
    (``pack(j)``) at its forward and dropped after its backward, its input and output kept in
    between: a stage holds the inputs of the micro-batches in flight only, as the memory model
    counts them (design §9.5), not the step's. ``rows[j]`` is the hidden rows micro-batch ``j``
    hands between stages, known before it is packed (a receive is posted before its forward).
    On the last stage the output is the micro-batch's part of the normalised loss
    (:func:`hydraulis.runtime.model.loss.part_loss`), summed on the device into ``loss``."""

    def __init__(self, model: StageModel, pack: Callable[[int], PackedMicroBatch], rows: Sequence[int],
                 loss_tokens: int) -> None:
        self.model, self.pack, self.rows, self.loss_tokens = model, pack, rows, loss_tokens
        model.count_loss_tokens(loss_tokens)
        self.saved: dict[int, tuple[torch.Tensor | None, torch.Tensor]] = {}
        self.loss = torch.zeros((), dtype=torch.float32, device=next(model.parameters()).device)

    def shape(self, j: int) -> Shape:
        """The hidden states micro-batch ``j`` hands between stages (and their gradient)."""
        return self.rows[j], self.model.model.hidden

    def forward(self, j: int, received: torch.Tensor | None) -> torch.Tensor | None:
        """Run micro-batch ``j``; the activation to send on (None on the last stage)."""
        if received is not None:
            received.requires_grad_(True)
        out = self.model(received, self.pack(j))
        if self.model.last:
            out = part_loss(out, self.loss_tokens)
            self.loss += out.detach()
        self.saved[j] = (received, out)
        return None if self.model.last else out.detach()

    def backward(self, j: int, grad: torch.Tensor | None) -> torch.Tensor | None:
        """Back-propagate micro-batch ``j``; the input gradient to send back (None on stage 0)."""
        received, out = self.saved.pop(j)
        if self.model.last:
            out.backward()
        else:
            torch.autograd.backward(out, grad)
        return None if self.model.first else received.grad


def run_schedule(work: StageWork, link: StageLink, schedule: Sequence[Operation]) -> None:
    """Execute ``schedule``: each operation's send is posted with the next operation's receive
    when both go to the same neighbour — a forward followed by a backward, or the reverse
    (below) — else alone.

    Deadlock freedom: a send may not complete before its receive is posted (NCCL; gloo too for
    large messages), so sends are never waited for alone while the peer waits for something else.
    As in Megatron-LM's non-interleaved schedule, each send is posted together with the receive the
    stage needs next from the same neighbour — a forward output with the gradient of the backward
    that follows (``send_forward_recv_backward``), an input gradient with the input of the forward
    that follows (``send_backward_recv_forward``) — each pair in one ``batch_isend_irecv``.
    Neighbouring stages post the pairs in the same order, so every posted send meets its receive.

    Stages of different tensor-parallel degree (a staged scheme, design §9.2) hand off by the rule
    of :class:`~hydraulis.runtime.rank_map.HandOff`: a rank receives each message from one rank of
    the neighbour stage and sends to zero or more (``1|2:3>1:1``: stage 1's one rank receives from
    tp rank 0 of stage 0 and sends each input gradient to both). Every rank of a stage runs the
    stage's schedule, so between any two ranks that exchange messages both post them in the stage
    order — a sub-sequence of the one-rank-per-stage exchange above, whose deadlock freedom it
    keeps; a batch may then hold several sends, or none at all (skipped).
    """
    received: dict[tuple[Phase, int], torch.Tensor | None] = {}
    for index, op in enumerate(schedule):
        _run_operation(work, link, op, schedule[index + 1] if index + 1 < len(schedule) else None, received)


def _run_operation(work: StageWork, link: StageLink, op: Operation, following: Operation | None,
                   received: dict[tuple[Phase, int], torch.Tensor | None]) -> None:
    """One operation of :func:`run_schedule`, its receive and its send (``received``: inputs
    already received with a send). Its own references end with it: the gradient it received and
    the one it sent (sends are waited for) are not held through the next operation — on a middle
    or last stage that was a micro-batch's ``b·H/s`` bytes per token above the activation model
    (design §6.4) during every forward that follows a backward."""
    forward = op.phase is Phase.FORWARD
    if (op.phase, op.micro_batch) in received:
        incoming = received.pop((op.phase, op.micro_batch))
    else:
        incoming = (link.recv_forward if forward else link.recv_backward)(work.shape(op.micro_batch))
    outgoing = (work.forward if forward else work.backward)(op.micro_batch, incoming)
    if following is not None and following.phase is not op.phase:
        paired = link.send_forward_recv_backward if forward else link.send_backward_recv_forward
        received[following.phase, following.micro_batch] = paired(outgoing, work.shape(following.micro_batch))
    else:
        (link.send_forward if forward else link.send_backward)(outgoing)


def run_1f1b(work: StageWork, link: StageLink, micro_batches: int, pp: int, stage: int) -> None:
    """The 1F1B schedule of ``stage`` (:func:`one_f_one_b`), micro-batches in plan order."""
    run_schedule(work, link, one_f_one_b(micro_batches, pp, stage))
