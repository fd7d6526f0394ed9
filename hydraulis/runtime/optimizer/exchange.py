"""The step's two exchanges with the optimizer layout, bucket by bucket and asynchronous
(design §9.4).

A :class:`~.routes.Route` cuts both exchanges into ``K`` buckets (every rank issues the
``K`` all-to-alls of each exchange in bucket order, on a process group of their own, so they
match whatever else the ranks are doing): the gradients' :class:`Reduction`, each bucket sent
as soon as the last micro-batch's backward has accumulated it, and the updated weights'
:class:`Propagation`, each bucket waited for just before the first forward that needs it
(:class:`WeightGate`). With the overlap off the same buckets run back to back: all weights
before the forward, all gradients after the backward. Timing the buckets: :class:`_Exchanges`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from hydraulis.runtime.optimizer.routes import Route


class _Exchanges:
    """Issued buckets of one exchange: output buffers, works and, given a clock, in-flight marks.

    Given the step's clock (:func:`~hydraulis.runtime.parallel.operations.step_clock`;
    only with ``record_operations``), the time in flight of each bucket holding the rank's gradients
    (issued → complete) is kept for the step's record: on the CPU the completion is noted by the
    work's future, on CUDA by an event recorded on a side stream that waits for the work. Without a
    clock no bucket is timed: no event, no side stream, no callback.
    """

    def __init__(self, route: Route, clock, device: torch.device) -> None:
        self.route, self.clock, self.device = route, clock, device
        self.incoming: dict[int, torch.Tensor] = {}
        self.works: dict[int, object] = {}
        self.marks: dict[int, list] = {}
        self.side = torch.cuda.Stream(device) if device.type == "cuda" and clock is not None else None

    def issue(self, bucket: int, outgoing: torch.Tensor, output_splits: list[int], input_splits: list[int]) -> None:
        issued = self.clock.mark() if self.clock is not None else None
        self.incoming[bucket], work = self.route.world.all_to_all_start(outgoing, output_splits, input_splits)
        self.works[bucket] = work
        if self.clock is None:
            return
        self.marks[bucket] = [issued, issued]
        if work is None:
            return
        if self.side is not None:
            with torch.cuda.stream(self.side):
                work.wait()
                self.marks[bucket][1] = self.clock.mark()
        else:
            self.marks[bucket][1] = None
            work.get_future().then(lambda _, marks=self.marks[bucket]: marks.__setitem__(1, self.clock.mark()))

    def wait(self, bucket: int) -> torch.Tensor:
        work = self.works.pop(bucket)
        if work is not None:
            work.wait()
        if bucket in self.marks and self.marks[bucket][1] is None:
            self.marks[bucket][1] = self.clock.mark()
        return self.incoming.pop(bucket)

    def intervals_ms(self) -> list[tuple[float, float]]:
        """Every bucket's ``(issued, complete)`` in ms since the clock's origin (after the step's
        synchronisation on CUDA); none without a clock."""
        return [(self.clock.ms(a), self.clock.ms(b)) for a, b in self.marks.values()]


class Reduction:
    """One step's gradient exchange of one rank; ``grads()`` gives the shards' accumulated
    gradients, sent in ``dtype``; ``clock`` (or None) times the buckets.

    :class:`Reduction` — a bucket's gradients leave as soon as the last micro-batch's backward has
    accumulated every shard of it (:meth:`~hydraulis.runtime.gradients.GradientBuffers.arm` calls
    :meth:`Reduction.ready`), in bucket order (a bucket ready before an earlier one waits for it);
    a bucket holding none of the rank's gradients (a holder cutting fewer than ``K``) is ready from
    the start and leaves as soon as the order reaches it; :meth:`Reduction.finish` issues what is
    left (everything, on a rank that computed nothing or with the overlap off), waits for each
    bucket and adds it into the owner's fp32 gradient, bucket by bucket, source by source — a
    fixed order, so the sum is deterministic; the optimizer steps after it (:mod:`.master`:
    update, and clipping by the global norm where configured, see the whole reduced gradient).
    """

    def __init__(self, route: Route, grads: Callable[[], list], dtype: torch.dtype, device: torch.device,
                 clock) -> None:
        self.route, self.grads, self.dtype, self.device = route, grads, dtype, device
        self.exchanges = _Exchanges(route, clock, device)
        self.own = set(route.plan.shard_buckets)
        self.ready_buckets = set(range(route.buckets)) - self.own
        self.next = 0

    def ready(self, bucket: int) -> None:
        """Bucket ``bucket`` is complete: issue it and every ready bucket after it, in order."""
        self.ready_buckets.add(bucket)
        while self.next in self.ready_buckets:
            self._issue(self.next)

    def finish(self, into: torch.Tensor) -> None:
        """Issue the buckets not yet issued, then ``into`` ← the sum of every holder's gradient."""
        while self.next < self.route.buckets:
            self._issue(self.next)
        into.zero_()
        for bucket in range(self.route.buckets):
            self.route.add_received(self.exchanges.wait(bucket).to(torch.float32), into, bucket)

    def intervals_ms(self) -> list[tuple[float, float]]:
        """The in-flight intervals of the buckets holding this rank's gradients."""
        return [span for bucket, span in zip(self.exchanges.marks, self.exchanges.intervals_ms()) if bucket in self.own]

    def _issue(self, bucket: int) -> None:
        outgoing = self.route.pack_gradients(self.grads(), self.device, bucket).to(self.dtype)
        self.exchanges.issue(bucket, outgoing, self.route.received[True][bucket], self.route.sent[True][bucket])
        self.next = bucket + 1


class Propagation:
    """One step's weights from the owners' ``master`` into ``params`` (this rank's shards, in
    shard order), every bucket issued at construction in the compute ``dtype``, last bucket first.

    :class:`Propagation` — every bucket of the updated weights is issued at the step's start in
    descending order, the order of use: a stage's first layers are cut last (:mod:`hydraulis.sharding.buckets`),
    and the gloo and NCCL queues complete a group's collectives in the order issued, so a first
    forward waits for one bucket, not for all of them; a bucket is waited for and copied into the
    compute weights just before the first module that uses one of its parameters runs forward
    (:class:`WeightGate`'s forward pre-hooks), the rest after the stage's work.
    """

    def __init__(self, route: Route, master: torch.Tensor, params: list, dtype: torch.dtype, clock) -> None:
        self.route, self.params = route, params
        self.exchanges = _Exchanges(route, clock, master.device)
        self.pending = set(range(route.buckets))
        for bucket in reversed(range(route.buckets)):
            self.exchanges.issue(bucket, route.pack_weights(master, dtype, bucket), route.sent[False][bucket],
                                 route.received[False][bucket])

    def need(self, buckets: Iterable[int]) -> None:
        """Wait for ``buckets`` (those not yet arrived) and copy them into the weights."""
        for bucket in sorted(set(buckets) & self.pending):
            self.route.copy_received(self.exchanges.wait(bucket), self.params, bucket)
            self.pending.discard(bucket)

    def finish(self) -> None:
        self.need(range(self.route.buckets))


class WeightGate:
    """Forward pre-hooks on a stage model's modules: before a module runs that uses parameters —
    its own, or those of the children it runs without calling them (``fused_children``, as a
    block's column-parallel linears: :mod:`hydraulis.runtime.parallel.columns`) — the current
    :class:`Propagation` (if any) delivers their buckets."""

    def __init__(self, model: torch.nn.Module, params: list[torch.nn.Parameter], buckets: tuple[int, ...]) -> None:
        self.propagation: Propagation | None = None
        bucket_of = {id(p): b for p, b in zip(params, buckets)}
        for module in model.modules():
            used = [*module.parameters(recurse=False),
                    *(p for child in getattr(module, "fused_children", ()) for p in child.parameters(recurse=False))]
            mine = {bucket_of[id(p)] for p in used if id(p) in bucket_of}
            if mine:
                module.register_forward_pre_hook(self._hook(tuple(sorted(mine))))

    def _hook(self, buckets: tuple[int, ...]):
        def deliver(*_) -> None:
            if self.propagation is not None:
                self.propagation.need(buckets)

        return deliver
