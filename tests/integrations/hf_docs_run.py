"""One rank of docs/integrations.md's ``Trainer`` code, recording the sequences each step trained on.

    python tests/integrations/hf_docs_run.py OUT   (with torchrun's variables for several ranks)

writes ``OUT.<rank>.json``: every step's micro-batches as token lists, and the sampler's global batches.
"""

import itertools
import json
import os
import re
import runpy
import sys
from pathlib import Path

import torch

from hydraulis.integrations import hf

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def docs_code() -> str:
    """The Python block of the docs that builds a ``BalancedTrainer``."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    return next(block for block in blocks if "BalancedTrainer(" in block)


def sequences(micro_batch: dict) -> list[list[int]]:
    """A packed row cut where ``position_ids`` restart (DataCollatorWithFlattening)."""
    ids = micro_batch["input_ids"].reshape(-1).tolist()
    positions = micro_batch["position_ids"].reshape(-1).tolist()
    starts = [i for i, p in enumerate(positions) if p == 0] + [len(ids)]
    return [ids[a:b] for a, b in itertools.pairwise(starts)]


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    steps, samplers = [], []
    training_step, init = hf.BalancedTrainer.training_step, hf.BalancedTrainer.__init__

    def recording_step(self, model, inputs, num_items_in_batch=None):
        steps.append({"step": self.state.global_step, "micro_batches": [sequences(mb) for mb in inputs]})
        return training_step(self, model, inputs, num_items_in_batch)

    def recording_init(self, *args, sampler, **kwargs):
        samplers.append(sampler)
        init(self, *args, sampler=sampler, **kwargs)

    hf.BalancedTrainer.training_step = recording_step
    hf.BalancedTrainer.__init__ = recording_init
    os.chdir(out.parent)
    script = out.parent / "docs_trainer.py"
    script.write_text(docs_code(), encoding="utf-8")
    namespace = runpy.run_path(str(script))
    dataset, sampler, trainer = namespace["dataset"], samplers[0], namespace["trainer"]
    record = {"rank": sampler.rank, "world": sampler.num_replicas, "steps": steps,
              "global_batches": [[dataset[int(i)]["input_ids"] for i in b] for b in sampler.global_batches()],
              "losses": [e["loss"] for e in trainer.state.log_history if "loss" in e]}
    Path(f"{out}.{sampler.rank}.json").write_text(json.dumps(record))
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        sys.stdout.flush()
        os._exit(0)  # skip teardown: gloo's group destructor (torch 2.13) can wait on a peer already gone


if __name__ == "__main__":
    main()
