"""One rank of a Hugging Face ``Trainer`` run (CPU, gloo) on long-tailed random token sequences,
with the default sampler or Hydraulis' ``BalancedBatchSampler`` (docs/integrations.md).

Started once per rank with torchrun's variables (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``); rank 0 writes ``{"sampler", "losses", "step_ms", "splits"}`` as JSON to
``--out``. One optimizer step is one global batch of ``--batch-size`` sequences, one epoch of
``--steps`` batches, and every run sees the *same* global batches (the balanced sampler's
shuffle). ``--sampler default`` is the ``Trainer``'s own loader given that order, which deals
every rank the same number of sequences (rank ``r`` the batch's ``r``-th equal share);
``balanced`` splits each batch by predicted time; ``alternating`` runs every batch twice, one
step with each split, the split going first alternating from batch to batch — on a shared
machine the two steps of a batch see nearly the same load, so their ratio is the split's effect.

Both samplers feed the same packed collator, transformers' ``DataCollatorWithFlattening``: a
rank's micro-batch is its sequences concatenated into one row, ``position_ids`` restarting per
sequence, so the model (sdpa attention) masks attention to each sequence and no token is padding
(transformers finds the sequences from ``position_ids`` only without a cache: ``use_cache=False``,
or a training forward lets every token attend across the whole row).
On the CPU that mask is a dense ``T×T`` one over the row's ``T`` tokens, so a micro-batch costs
``γ + α·T² + β·T`` — increasing in ``T`` alone. The balanced sampler packs each rank's share into
one micro-batch (``max_tokens`` = the batch's tokens), where balancing the step *is* balancing
``T`` across ranks: it is given that cost model with the quadratic and fixed terms dropped
(``a = c = 0``, ``b = 1``), which ranks every plan exactly as the packed run does.

    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \\
        python examples/trainer_balanced.py --sampler balanced --out run.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader, Dataset
from transformers import (
    DataCollatorWithFlattening,
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from hydraulis.base.types import TimeCoefficients
from hydraulis.integrations.torch import BalancedBatchSampler

VOCAB = 128
TOKENS = TimeCoefficients(a=0.0, b=1.0, c=0.0)
"""One micro-batch per rank of the packed row: its tokens order the ranks as its time does (module docstring)."""


class Sequences(Dataset):
    def __init__(self, lengths: np.ndarray, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.items = [rng.integers(1, VOCAB, size=int(s)).tolist() for s in lengths]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.items[i]}


class BalancedTrainer(Trainer):
    """A ``Trainer`` whose training loader uses ``batch_sampler`` (:class:`BalancedBatchSampler`)."""

    def __init__(self, *args, batch_sampler: BalancedBatchSampler | Alternating, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batch_sampler = batch_sampler

    def get_train_dataloader(self) -> DataLoader:
        """Prepared as the ``Trainer`` prepares its own loader (accelerate's ``DataLoaderShard``:
        batches placed on the device, the gradient-accumulation state kept) but not sharded
        again: the batch sampler yields only this rank's micro-batches already."""
        loader = DataLoader(self.train_dataset, batch_sampler=self.batch_sampler, collate_fn=self.data_collator)
        return prepare_data_loader(loader, self.args.device, num_processes=1, process_index=0, put_on_device=True)


class SameBatchesTrainer(Trainer):
    """The default ``Trainer`` loader, walking ``order`` instead of its own shuffle."""

    def __init__(self, *args, order: list[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.order = order

    def _get_train_sampler(self, train_dataset=None) -> list[int]:
        return self.order


class Alternating:
    """Every global batch of ``sampler``'s epoch twice: this rank's equal share (the default
    split) and its balanced micro-batches, the split going first alternating by batch;
    ``splits`` names each step's split."""

    def __init__(self, sampler: BalancedBatchSampler) -> None:
        self.steps: list[tuple[str, list[int]]] = []
        rank, world = sampler.rank, sampler.num_replicas
        for k, (batch, plan) in enumerate(zip(sampler.global_batches(), sampler.plans())):
            share = len(batch) // world
            pair = [("default", [[int(i) for i in batch[rank * share:(rank + 1) * share]]]),
                    ("balanced", [list(mb) for mb in plan[rank]])]
            for split, micro_batches in (pair if k % 2 == 0 else pair[::-1]):
                self.steps.extend((split, mb) for mb in micro_batches)

    @property
    def splits(self) -> list[str]:
        return [split for split, _ in self.steps]

    def __iter__(self):
        return iter([indices for _, indices in self.steps])

    def __len__(self) -> int:
        return len(self.steps)


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
    parser.add_argument("--sampler", choices=("default", "balanced", "alternating"), required=True,
                        help="the Trainer's loader, ours, or every batch once with each (module docstring)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per global batch")
    parser.add_argument("--longest", type=int, default=512, help="longest sequence (tokens)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden size of the tiny Llama")
    parser.add_argument("--layers", type=int, default=2, help="decoder layers of the tiny Llama")
    parser.add_argument("--out", required=True)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    lengths = long_tailed(args.batch_size * args.steps, args.longest, seed=1)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=4,
                         max_position_embeddings=args.longest, attn_implementation="sdpa", use_cache=False)
    steps = 2 * args.steps if args.sampler == "alternating" else args.steps
    training = TrainingArguments(output_dir=args.workdir or f"{args.out}.work", use_cpu=True, ddp_backend="gloo",
                                 report_to=[], max_steps=steps, per_device_train_batch_size=args.batch_size // world,
                                 learning_rate=1e-3, logging_steps=1, save_strategy="no", seed=0,
                                 dataloader_drop_last=True, disable_tqdm=True, ddp_find_unused_parameters=False)
    common = dict(model=LlamaForCausalLM(config), args=training, train_dataset=Sequences(lengths, seed=2),
                  data_collator=DataCollatorWithFlattening())
    times = StepTimes()
    sampler = BalancedBatchSampler(lengths, batch_size=args.batch_size, time=TOKENS, max_tokens=int(lengths.sum()),
                                   num_replicas=world, rank=rank, seed=0)
    splits = [args.sampler] * args.steps
    if args.sampler == "balanced":
        trainer = BalancedTrainer(batch_sampler=sampler, callbacks=[times], **common)
    elif args.sampler == "alternating":
        alternating = Alternating(sampler)
        splits = alternating.splits
        trainer = BalancedTrainer(batch_sampler=alternating, callbacks=[times], **common)
    else:
        order = [int(i) for batch in sampler.global_batches() for i in batch]
        trainer = SameBatchesTrainer(order=order, callbacks=[times], **common)
    trainer.train()
    if rank == 0:
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        with open(args.out, "w") as handle:
            json.dump({"sampler": args.sampler, "losses": losses, "step_ms": times.ms, "splits": splits}, handle)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # skip teardown: gloo's group destructor (torch 2.13) can wait forever on a peer already gone


if __name__ == "__main__":
    main()
