"""The LLM recipe — AdamW with decay groups, clipping at a global norm, warmup and cosine decay —
run distributed, in one spawned job of 4 processes (start-up is most of the cost), three ways:

1. 10 steps of ``1,2,1+1,1,2`` with a checkpoint at step 5, against ``transformers``'
   ``LlamaForCausalLM`` trained on the same batches, document by document, by
   ``torch.optim.AdamW``, ``clip_grad_norm_`` and ``LambdaLR`` (:mod:`hydraulis.runtime.reference`):
   the same losses, learning rates and gradient norms, the clip firing on some steps;
2. resumed at step 5 under ``2,1,1x2``: steps 5–9 as in the uninterrupted run;
3. an infinite gradient injected on rank 1 at step 1: every rank skips that step, weights and
   moments untouched, and the run ends with finite weights."""

import math
from pathlib import Path
from unittest import mock

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hydraulis.base.presets import model_preset
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.checkpoint.llama_mapping import hf_config, hf_name
from hydraulis.runtime.launch import RankContext, run_job
from hydraulis.runtime.optimizer import master
from hydraulis.runtime.optimizer.master import initial_weights
from hydraulis.runtime.reference import train_reference
from hydraulis.runtime.run import resolve_run
from hydraulis.runtime.trainer import train
from hydraulis.sharding.kinds import DeviceKind

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

OPTIONS = RuntimeOptions(device=DeviceKind.CPU, lr=2e-3, seed=3, clip_grad_norm=1.2, warmup_steps=3, min_lr=2e-4,
                         timeout_s=60.0)
FIRST, SECOND = "1,2,1+1,1,2", "2,1,1x2"
STEPS, RESUME_AT, INFINITE_AT = 10, 5, 1


def config(strategy: str, root: Path, **fields) -> TrainConfig:
    return TrainConfig("tiny", (strategy,), STEPS, token_budget=192, checkpoint_dir=str(root), runtime=OPTIONS,
                       **fields)


def poisoned_step(original, rank: int):
    """``OptimizerShard.step`` that, at step ``INFINITE_AT``, puts an inf into rank 1's gradient and
    checks on every rank that the step is skipped and leaves the buffer alone."""
    calls = []

    def step(shard, grad_norm, schedule):
        calls.append(None)
        if len(calls) - 1 != INFINITE_AT:
            return original(shard, grad_norm, schedule)
        before = {name: tensor.clone() for name, tensor in shard.tensors.items()}
        update = original(shard, grad_norm, schedule)
        assert update.skipped and shard.skipped == 1, f"rank {rank} did not skip"
        assert all(torch.equal(before[name], shard.tensors[name]) for name in before), f"rank {rank} moved"
        return update

    return step


def poisoned_norm(original, rank: int):
    calls = []

    def norm(grad, world):
        calls.append(None)
        if len(calls) - 1 == INFINITE_AT and rank == 1:
            grad[0] = math.inf
        return original(grad, world)

    return norm


def job(context: RankContext, root: Path) -> None:
    straight = train(context, resolve_run(config(FIRST, root / "straight", checkpoint_every=RESUME_AT)), OPTIONS,
                     canonical=True)
    resumed = train(context, resolve_run(config(SECOND, root / "resumed",
                                                resume=str(root / "straight" / f"step-{RESUME_AT:08d}"))), OPTIONS)
    from hydraulis.runtime import step as step_module

    with mock.patch.object(master.OptimizerShard, "step", poisoned_step(master.OptimizerShard.step, context.rank)), \
            mock.patch.object(step_module, "global_grad_norm",
                              poisoned_norm(step_module.global_grad_norm, context.rank)):
        poisoned = train(context, resolve_run(config(FIRST, root / "poisoned")), OPTIONS, canonical=True)
    if context.rank == 0:
        torch.save({"straight": straight, "resumed": resumed.records, "poisoned": poisoned}, root / "outcome.pt")


class LlamaReference:
    """``transformers``' model from the seed's initial weights, each document on its own."""

    def __init__(self) -> None:
        model = model_preset("tiny")
        settings = {k: v for k, v in hf_config(model, "float32").items() if k != "architectures"}
        self.module = LlamaForCausalLM(LlamaConfig(**settings, attn_implementation="eager")).float()
        theirs = dict(self.module.named_parameters())
        self.params = {name: theirs[hf_name(name)] for name in initial_weights(model, OPTIONS.seed)}
        with torch.no_grad():
            for name, value in initial_weights(model, OPTIONS.seed).items():
                self.params[name].copy_(value)

    def parameters_by_name(self) -> dict[str, torch.nn.Parameter]:
        return self.params

    def loss(self, documents, lengths) -> torch.Tensor:
        total = 0.0
        for document in documents:
            tokens = torch.as_tensor(document, dtype=torch.long)
            logits = self.module(input_ids=tokens[:-1].unsqueeze(0)).logits[0]
            total = total + torch.nn.functional.cross_entropy(logits, tokens[1:], reduction="sum")
        return total / sum(lengths)


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_the_recipe_matches_transformers_resumes_exactly_and_skips_an_infinite_step(tmp_path):
    run_job(job, (tmp_path,), OPTIONS, 4, 4)
    outcome = torch.load(tmp_path / "outcome.pt", weights_only=False)
    straight, resumed, poisoned = outcome["straight"], outcome["resumed"], outcome["poisoned"]

    reference = train_reference(resolve_run(config(FIRST, tmp_path / "reference")), OPTIONS, LlamaReference())
    records = straight.records
    assert max(relative(r.loss, ref) for r, ref in zip(records, reference.losses)) <= 1e-5
    assert max(relative(r.grad_norm, ref) for r, ref in zip(records, reference.grad_norms)) <= 1e-5
    assert [r.lr for r in records] == pytest.approx(reference.lrs, rel=1e-12)
    clipped = [r.grad_norm > OPTIONS.clip_grad_norm for r in records]
    assert any(clipped) and not all(clipped), [r.grad_norm for r in records]
    worst = max((straight.params[name].double() - value.double()).norm() / value.double().norm()
                for name, value in reference.params.items())
    assert worst <= 1e-5

    assert [r.step for r in resumed] == list(range(RESUME_AT, STEPS))
    assert {r.strategy for r in resumed} == {SECOND}
    for ours, theirs in zip(resumed, records[RESUME_AT:]):
        assert ours.lr == theirs.lr
        assert relative(ours.loss, theirs.loss) <= 1e-6 and relative(ours.grad_norm, theirs.grad_norm) <= 1e-5

    assert [r.skipped for r in poisoned.records] == [step == INFINITE_AT for step in range(STEPS)]
    assert math.isinf(poisoned.records[INFINITE_AT].grad_norm) and poisoned.records[-1].skipped_steps == 1
    assert poisoned.records[INFINITE_AT + 1].lr == poisoned.records[INFINITE_AT].lr
    assert all(torch.isfinite(value).all() for value in poisoned.params.values())
