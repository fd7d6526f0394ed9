"""One rank of a Hugging Face ``Trainer`` run (CPU, gloo) on long-tailed random token sequences,
with the default sampler or Hydraulis' ``BalancedBatchSampler`` (docs/integrations.md).

Started once per rank with torchrun's variables (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``); rank 0 writes ``{"sampler", "losses", "step_ms"}`` as JSON to ``--out``.
One optimizer step is one global batch of ``--batch-size`` sequences for both samplers (the
balanced one packs each rank's share into one micro-batch, ``max_tokens`` = the batch's tokens).

    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        python examples/trainer_balanced.py --sampler balanced --out run.json
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

from hydraulis.integrations.torch import BalancedBatchSampler
from hydraulis.types import TimeCoefficients

VOCAB = 128
TIME = TimeCoefficients(a=2e-5, b=0.02, c=5.0)
"""A rough time model of the tiny model on a CPU core (ms): only the shape matters here."""


class Sequences(Dataset):
    def __init__(self, lengths: np.ndarray, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.items = [rng.integers(1, VOCAB, size=int(s)).tolist() for s in lengths]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.items[i]}


def collate(items: list[dict]) -> dict:
    """Right-padded batch; padded positions are masked and ignored by the loss."""
    longest = max(len(x["input_ids"]) for x in items)
    ids = torch.zeros(len(items), longest, dtype=torch.long)
    mask = torch.zeros(len(items), longest, dtype=torch.long)
    for row, x in enumerate(items):
        ids[row, :len(x["input_ids"])] = torch.tensor(x["input_ids"])
        mask[row, :len(x["input_ids"])] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


class BalancedTrainer(Trainer):
    """A ``Trainer`` whose training loader uses :class:`BalancedBatchSampler`."""

    def __init__(self, *args, sampler: BalancedBatchSampler, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.balanced = sampler

    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_dataset, batch_sampler=self.balanced, collate_fn=self.data_collator)


class StepTimes(TrainerCallback):
    def __init__(self) -> None:
        self.started, self.ms = 0.0, []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.ms.append((time.perf_counter() - self.started) * 1e3)


def long_tailed(count: int, longest: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(3.5, 1.1, size=count).astype(np.int64) + 4, longest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sampler", choices=("default", "balanced"), required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per global batch")
    parser.add_argument("--longest", type=int, default=512)
    parser.add_argument("--out", required=True)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    lengths = long_tailed(args.batch_size * args.steps, args.longest, seed=1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=args.longest)
    training = TrainingArguments(output_dir=args.workdir or f"{args.out}.work", use_cpu=True, ddp_backend="gloo",
                                 report_to=[], max_steps=args.steps, per_device_train_batch_size=args.batch_size // world,
                                 learning_rate=1e-3, logging_steps=1, save_strategy="no", seed=0,
                                 dataloader_drop_last=True, disable_tqdm=True)
    common = dict(model=LlamaForCausalLM(config), args=training, train_dataset=Sequences(lengths, seed=2),
                  data_collator=collate)
    times = StepTimes()
    if args.sampler == "balanced":
        sampler = BalancedBatchSampler(lengths, batch_size=args.batch_size, time=TIME,
                                       max_tokens=int(lengths.sum()), num_replicas=world, rank=rank, seed=0)
        trainer = BalancedTrainer(sampler=sampler, callbacks=[times], **common)
    else:
        trainer = Trainer(callbacks=[times], **common)
    trainer.train()
    if rank == 0:
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        with open(args.out, "w") as handle:
            json.dump({"sampler": args.sampler, "losses": losses, "step_ms": times.ms}, handle)


if __name__ == "__main__":
    main()
