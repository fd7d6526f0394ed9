"""Collectives started early, waited for late or merged give what plain autograd gives: on 2 gloo
ranks, a block's fused column-parallel function (:mod:`hydraulis.runtime.parallel.columns`: the
input gradient's all-reduce, or reduce-scatter under sequence parallelism, in flight while the
weight gradients are computed; its shards apart, or in one storage as a stage lays them out) against the entry's conjugate collective followed by one
``F.linear`` per weight, and both against the unsharded block on one process; the
vocabulary-parallel cross-entropy (its target and sum-exp in one all-reduce) against
``F.cross_entropy`` of the whole logits; the context-parallel K/V all-gather, started, then
waited for after other work, against the cp ranks' rows concatenated (forward) and summed back
(backward). Every rank checks its own shards (a mismatch fails the
job with the rank's message)."""

import pytest
import torch
import torch.nn.functional as F

from hydraulis.job.config import RuntimeOptions
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.parallel.columns import column_parallel, stacked_rows
from hydraulis.runtime.parallel.context import start_gather_from_context
from hydraulis.runtime.parallel.group import ParallelGroup, conjugate
from hydraulis.runtime.parallel.tensor import IGNORE_INDEX, vocab_parallel_cross_entropy
from hydraulis.sharding.kinds import DeviceKind

pytestmark = pytest.mark.distributed

TOKENS, HIDDEN, VOCAB = 8, 6, 10
BLOCKS = {"qkv": (4, 2, 2), "head": (5,)}
"""Each block's output features per rank, one entry per column layer."""


def _plain(x: torch.Tensor, weights: list[torch.Tensor], group: ParallelGroup,
           sequence_parallel: bool) -> tuple[torch.Tensor, ...]:
    """The entry as its own autograd node, then one node per linear."""
    if sequence_parallel:
        entered = conjugate(x, group.all_gather, group.reduce_scatter)
    else:
        entered = conjugate(x, lambda t: t.view_as(t), lambda g: group.all_reduce(g.clone()))
    return tuple(F.linear(entered, weight) for weight in weights)


def _gradients(block, x, weights, cotangents, *args):
    """Outputs, input gradient and weight gradients of ``Σ_i ⟨block(x)_i, cotangents_i⟩``."""
    x = x.clone().requires_grad_(True)
    copies = (torch.cat(weights).split([w.shape[0] for w in weights]) if stacked_rows(weights)
              else [w.clone() for w in weights])
    weights = [torch.nn.Parameter(w) for w in copies]
    outputs = block(x, weights, *args)
    sum((y * c).sum() for y, c in zip(outputs, cotangents)).backward()
    return [y.detach() for y in outputs], x.grad, [w.grad for w in weights]


def _check_cross_entropy(group: ParallelGroup, generator: torch.Generator) -> None:
    logits = torch.randn(TOKENS, VOCAB, generator=generator, dtype=torch.float64) * 3
    labels = torch.randint(VOCAB, (TOKENS,), generator=generator)
    labels[1] = IGNORE_INDEX
    share = VOCAB // group.size
    columns = slice(group.rank * share, (group.rank + 1) * share)
    mine = logits[:, columns].clone().requires_grad_(True)
    loss = vocab_parallel_cross_entropy(mine, labels, group, columns.start)
    loss.sum().backward()
    whole = logits.clone().requires_grad_(True)
    expected = F.cross_entropy(whole, labels, ignore_index=IGNORE_INDEX, reduction="none")
    expected.sum().backward()
    assert torch.allclose(loss, expected, rtol=1e-12, atol=1e-12), f"rank {group.rank}: cross-entropy differs"
    assert torch.allclose(mine.grad, whole.grad[:, columns], rtol=1e-12, atol=1e-12), \
        f"rank {group.rank}: the logits' gradient differs"


def _check_context_gather(group: ParallelGroup, generator: torch.Generator) -> None:
    every = torch.randn(group.size, TOKENS, HIDDEN, generator=generator, dtype=torch.float64)
    weights = torch.randn(group.size * TOKENS, HIDDEN, generator=generator, dtype=torch.float64)
    x = every[group.rank].clone().requires_grad_(True)
    wait = start_gather_from_context(x, group)
    meanwhile = (x * 2).sum()
    gathered = wait()
    assert torch.equal(gathered, every.reshape(-1, HIDDEN)), f"rank {group.rank}: the gathered rows differ"
    ((gathered * weights).sum() + meanwhile).backward()
    expected = group.size * weights[group.rank * TOKENS:(group.rank + 1) * TOKENS] + 2
    assert torch.allclose(x.grad, expected, rtol=1e-12, atol=1e-12), f"rank {group.rank}: the rows' gradient differs"


def job(context: RankContext) -> None:
    group, rank, size = context.world, context.rank, context.world_size
    generator = torch.Generator().manual_seed(0)
    _check_cross_entropy(group, generator)
    _check_context_gather(group, generator)
    for name, features in BLOCKS.items():
        x = torch.randn(TOKENS, HIDDEN, generator=generator, dtype=torch.float64)
        weights = [torch.randn(size * f, HIDDEN, generator=generator, dtype=torch.float64) for f in features]
        cotangents = [torch.randn(TOKENS, size * f, generator=generator, dtype=torch.float64) for f in features]
        whole = _gradients(lambda t, ws: tuple(F.linear(t, w) for w in ws), x, weights, cotangents)
        shards = [w[rank * f:(rank + 1) * f] for w, f in zip(weights, features)]
        columns = [c[:, rank * f:(rank + 1) * f] for c, f in zip(cotangents, features)]
        for sequence_parallel in (False, True):
            rows = slice(rank * TOKENS // size, (rank + 1) * TOKENS // size) if sequence_parallel else slice(None)
            plain = _gradients(_plain, x[rows], shards, columns, group, sequence_parallel)
            expected = ([y[:, rank * f:(rank + 1) * f] for y, f in zip(whole[0], features)], whole[1][rows],
                        [g[rank * f:(rank + 1) * f] for g, f in zip(whole[2], features)])
            for stacked in (False, True):
                mine = list(torch.cat(shards).split([s.shape[0] for s in shards])) if stacked else shards
                assert stacked_rows(mine) or not stacked
                fused = _gradients(column_parallel, x[rows], mine, columns, group, sequence_parallel)
                case = f"rank {rank}, {name}, sequence parallel {sequence_parallel}, one storage {stacked}"
                for what, a, b, c in zip(("outputs", "input gradient", "weight gradients"), fused, plain, expected):
                    for got, reference, single in zip(*(v if isinstance(v, list) else [v] for v in (a, b, c))):
                        assert torch.allclose(got, reference, rtol=1e-12, atol=1e-12), \
                            f"{case}: {what} differ from autograd's"
                        assert torch.allclose(got, single, rtol=1e-10, atol=1e-10), f"{case}: {what} differ from one process"


def test_started_merged_and_fused_collectives_match_plain_autograd_and_one_process():
    run_job(job, (), RuntimeOptions(device=DeviceKind.CPU), 2)
