"""``hydraulis.integrations.hf``: docs/integrations.md's ``Trainer`` code run in 1 and 2 gloo
processes gives each step exactly its global batch, each sequence once; re-sharding is refused."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate", reason="the Trainer needs accelerate (the dev extra installs it)")

from hydraulis.base.types import TimeCoefficients
from hydraulis.integrations.torch import BalancedBatchSampler

RUN = Path(__file__).resolve().parent / "hf_docs_run.py"
ROOT = Path(__file__).resolve().parents[2]


def run_docs_code(tmp_path: Path, world: int) -> list[dict]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "seen"
    ranks = []
    for rank in range(world):
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT), RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable, str(RUN), str(out)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outputs = [r.communicate(timeout=600)[0] for r in ranks]
    assert all(r.returncode == 0 for r in ranks), "\n".join(o[-3000:] for o in outputs)
    return [json.loads(Path(f"{out}.{rank}.json").read_text()) for rank in range(world)]


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("world", [1, 2])
def test_each_step_trains_on_its_global_batch_each_sequence_once(tmp_path, world):
    records = run_docs_code(tmp_path, world)
    batches = records[0]["global_batches"]
    assert all(r["global_batches"] == batches for r in records)
    steps = len(records[0]["steps"])
    assert steps == 4 and all(len(r["steps"]) == steps for r in records)
    counts = []
    for k in range(steps):
        seen = [seq for r in records for mb in r["steps"][k]["micro_batches"] for seq in mb]
        assert sorted(seen) == sorted(batches[k])
        per_rank = {len(r["steps"][k]["micro_batches"]) for r in records}
        assert len(per_rank) == 1
        counts.append(per_rank.pop())
    assert len(set(counts)) > 1, f"micro-batches per step {counts}: the docs' example should show them vary"
    losses = records[0]["losses"]
    assert len(losses) == steps and all(0 < loss < 10 for loss in losses)


def test_accelerate_resharding_is_refused_with_a_clear_error():
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader

    lengths = np.arange(1, 33)
    sampler = BalancedBatchSampler(lengths, batch_size=16, time=TimeCoefficients(a=0.0, b=1.0, c=0.0),
                                   max_tokens=64, num_replicas=2, rank=0)
    loader = DataLoader(list(range(32)), batch_sampler=sampler)
    with pytest.raises(ValueError, match="^batch_size: 16 is not a per-process batch size"):
        prepare_data_loader(loader, "cpu", num_processes=2, process_index=0)


def test_a_step_has_the_gradient_of_the_global_batch_mean_loss(tmp_path):
    """However the sampler splits a global batch into micro-batches, the step's gradient is that of
    the mean token loss over the whole batch (one packed row here)."""
    import copy

    import torch
    from transformers import (
        DataCollatorWithFlattening,
        LlamaConfig,
        LlamaForCausalLM,
        TrainingArguments,
    )

    from hydraulis.integrations.hf import BalancedTrainer, RankShare

    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    lengths = rng.integers(8, 60, 16)
    dataset = [{"input_ids": rng.integers(1, 64, int(s)).tolist()} for s in lengths]
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, use_cache=False))
    reference = copy.deepcopy(model)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], max_steps=1, save_strategy="no")
    sampler = BalancedBatchSampler(lengths, batch_size=16, time=TimeCoefficients(a=0.0, b=1.0, c=1.0),
                                   max_tokens=120, num_replicas=1, rank=0)
    collator = DataCollatorWithFlattening()
    trainer = BalancedTrainer(model=model, args=args, train_dataset=dataset, sampler=sampler, data_collator=collator)
    share = next(iter(trainer.get_train_dataloader()))
    assert isinstance(share, RankShare) and len(share) > 2
    trainer.current_gradient_accumulation_steps = 1
    trainer.training_step(trainer.model, share)
    batch = sampler.global_batches()[0]
    reference(**collator([dataset[int(i)] for i in batch])).loss.backward()
    for (name, ours), theirs in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(ours.grad, theirs.grad, rtol=1e-4, atol=1e-6), name
