"""Deliberate distribution bugs, injected into the ranks of a spawned job by test-only patching
(nothing in the product knows of them).

A test replaces ``hydraulis.runtime.equivalence._distributed_job`` in its own process with
``functools.partial(job_with_faults, faults)``; the launcher pickles that by reference, so each
spawned rank imports this module and runs :func:`job_with_faults`, which patches the rank's own
modules around each case's training (case ``i`` under ``faults[i]``) and then runs the real job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from unittest import mock

import torch

import hydraulis.runtime.equivalence as equivalence
from hydraulis.runtime import step
from hydraulis.runtime.model import decoder
from hydraulis.runtime.optimizer import exchange, routes
from hydraulis.runtime.parallel import columns
from hydraulis.sharding import parameters as sharding


@contextmanager
def _norm_gradient_per_tp_rank() -> Iterator[None]:
    """Every tp rank contributes the replicated RMSNorm weights' gradient (counted tp times)."""
    shard_of = sharding.shard_of

    def contributing(*args):
        return dataclasses.replace(shard_of(*args), contributes=True)

    with mock.patch.object(sharding, "shard_of", contributing), mock.patch.object(routes, "shard_of", contributing):
        yield


def _tp_all_reduce_missing_in_backward() -> mock._patch:
    """The tensor-parallel region's entry is the identity in backward too (no all-reduce of the
    input gradient over the tp ranks)."""
    return mock.patch.object(columns, "start_input_reduction", lambda partial, group, sequence_parallel: (partial, None))


def _loss_normalised_per_pipeline() -> mock._patch:
    """Each pipeline divides its loss by its own loss tokens instead of the global batch's."""
    compute = step.StepRunner._compute

    def per_pipeline(self, stage, plan, documents, tokens, *rest):
        return compute(self, stage, plan, documents, sum(mb.tokens for mb in plan.pipelines[stage.place.pipeline]
                                                             .micro_batches), *rest)

    return mock.patch.object(step.StepRunner, "_compute", per_pipeline)


def _context_chunks_in_wrong_order() -> mock._patch:
    """The gathered keys and values come in reversed cp-rank order (the masks assume rank-major)."""
    start = decoder.start_gather_from_context

    def reversed_ranks(x, group):
        wait = start(x, group)
        return lambda: torch.cat(tuple(reversed(wait().chunk(group.size))))

    return mock.patch.object(decoder, "start_gather_from_context", reversed_ranks)


@contextmanager
def _pipeline_stage_gradient_dropped() -> Iterator[None]:
    """The first stage of a pipeline of several stages sends zeros instead of its gradients (its
    buckets leave during the backward, so the fault is in what they carry)."""
    schedule, issue = step.run_1f1b, exchange.Reduction._issue
    place = {"dropping": False}

    def scheduling(work, link, micro_batches, pp, stage):
        place["dropping"] = pp > 1 and stage == 0
        schedule(work, link, micro_batches, pp, stage)

    def issuing(self, bucket):
        if not place["dropping"]:
            return issue(self, bucket)
        grads = self.grads
        self.grads = lambda: [None if g is None else torch.zeros_like(g) for g in grads()]
        try:
            return issue(self, bucket)
        finally:
            self.grads = grads

    with mock.patch.object(step, "run_1f1b", scheduling), mock.patch.object(exchange.Reduction, "_issue", issuing):
        yield


FAULTS: dict[str, Callable[[], AbstractContextManager]] = {
    "norm gradient per tp rank": _norm_gradient_per_tp_rank,
    "tp all-reduce missing in backward": _tp_all_reduce_missing_in_backward,
    "loss normalised per pipeline": _loss_normalised_per_pipeline,
    "cp chunks in wrong order": _context_chunks_in_wrong_order,
    "pp stage gradient dropped": _pipeline_stage_gradient_dropped,
}
"""Each fault's patch (applied in a rank process)."""


@contextmanager
def injected(fault: str | None) -> Iterator[None]:
    if fault is None:
        yield
        return
    with FAULTS[fault]():
        yield


def job_with_faults(faults: tuple[str | None, ...], context, runs, options, folder) -> None:
    """The equivalence check's distributed job, case ``i`` trained under ``faults[i]`` (None: none)."""
    cases = iter(faults)
    train = equivalence.train

    def train_with_fault(*args, **kwargs):
        with injected(next(cases)):
            return train(*args, **kwargs)

    with mock.patch.object(equivalence, "train", train_with_fault):
        equivalence._distributed_job(context, runs, options, folder)
