"""Hydraulis inside other runtimes: Megatron-Core's hybrid CP scheduler against ours on the cost
model, and the Hugging Face ``Trainer`` measured with the default sampler and with ours.

Part 1 (predicted, design §4 per rank, docs/integrations.md): long-tailed steps (synthetic:
``examples/data/longtail.txt``'s distribution; the standard-library corpus: its files' byte
counts / 4 as token counts) are planned by megatron-core's ``BalancedCPScheduler`` and by
``HydraulisCPScheduler`` with the same ``max_seq_len_per_rank`` (the least ``S_k/k`` of the
space's ``(k, 8, 1)``, so both plans fit memory), at 64 DP×CP ranks (LLaMA-7B, A800) and
1,024 (LLaMA-32B, H100), tp 8, analytic spaces; both plans are timed by
:func:`~hydraulis.integrations.cp_groups.cp_step_ms` with the fixed cost per sub-sample (as
Megatron's schedule runs them) and per group. Part 2 (measured on this CPU): the 2-process
``Trainer`` run of ``examples/trainer_balanced.py`` with each sampler, interleaved.

    python benchmarks/integrations.py [--steps 8] [--trainer-repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.data.stdlib import stdlib_root
from hydraulis.integrations.cp_groups import CPGroups, FixedCost, cp_step_ms
from hydraulis.integrations.cp_ranks import cp_ranks
from hydraulis.integrations.megatron import HydraulisCPScheduler
from hydraulis.presets import device_preset, model_preset
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.specs import Cluster
from hydraulis.workload import sample_batches

SCALES = (("llama-7b", "a800-80g", 64, 16_384), ("llama-32b", "h100-80g", 1024, 8_192))
"""(model, device, DP×CP ranks, tokens per rank in a step)."""
TP = 8
PLANNED_CP = 16
"""``max_seq_len_per_rank`` is what every ``(k, 8, 1)`` with ``k`` up to this holds per rank; the
space lists every power of two up to the ranks, so Megatron's widened samples can be timed."""
MAX_LEN = 32_768
ROOT = Path(__file__).resolve().parents[1]


class Group:
    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


def corpora() -> dict[str, np.ndarray]:
    stdlib = [max(1, p.stat().st_size // 4) for p in stdlib_root().rglob("*.py") if "site-packages" not in p.parts]
    return {"synthetic": read_lengths(ROOT / "examples/data/longtail.txt"), "stdlib": np.array(stdlib)}


def predicted(steps: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.pipeline_parallel.hybrid_cp_schedule import BalancedCPScheduler
    for name, lengths in corpora().items():
        for model, device, ranks, per_rank in SCALES:
            spec = device_preset(device)
            space = analytic_scheme_space(model_preset(model), spec, Cluster(ranks * TP, spec.devices_per_node, spec.name),
                                          tuple(2 ** i for i in range(ranks.bit_length())), (TP,), (1,),
                                          created="benchmark", tool_version="benchmark")
            room = cp_ranks(space, TP, ranks, 10**9)
            per_rank_len = min(o.capacity // o.cp for o in room.options if o.cp <= PLANNED_CP)
            ours = HydraulisCPScheduler(per_rank_len, Group(ranks), space=space, tp=TP)
            ratios = {f: [] for f in FixedCost}
            times = {"ours": [], "megatron": []}
            for batch in sample_batches(lengths, ranks * per_rank, steps, MAX_LEN, seed=1):
                pairs = list(enumerate(batch.tolist()))
                _, mine = ours.get_groups_and_subsamples(pairs, None)
                _, theirs = BalancedCPScheduler(per_rank_len, Group(ranks)).get_groups_and_subsamples(pairs, None)
                plans = [CPGroups(tuple(tuple(tuple(r) for r in g) for g in ids)) for ids in (mine, theirs)]
                for fixed in FixedCost:
                    a, b = (cp_step_ms(p, batch, ours.ranks, fixed) for p in plans)
                    ratios[fixed].append(b / a)
                    if fixed is FixedCost.SUBSAMPLE:
                        times["ours"].append(a)
                        times["megatron"].append(b)
            print(f"{name} {model} ranks={ranks} tp={TP} steps={steps}: hydraulis_ms={np.median(times['ours']):.0f} "
                  f"megatron_ms={np.median(times['megatron']):.0f} "
                  f"megatron_over_hydraulis={np.median(ratios[FixedCost.SUBSAMPLE]):.2f} "
                  f"(fixed cost per group: {np.median(ratios[FixedCost.GROUP]):.2f})")


def trainer_run(sampler: str, steps: int, workdir: Path) -> list[float]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = workdir / f"{sampler}.json"
    ranks = [subprocess.Popen([sys.executable, str(ROOT / "examples/trainer_balanced.py"), "--sampler", sampler,
                               "--steps", str(steps), "--out", str(out), "--workdir", str(workdir / "work")],
                              env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                                       LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for r in range(2)]
    for r in ranks:
        r.wait(timeout=600)
    return json.loads(out.read_text())["step_ms"][1:]


def measured(steps: int, repeats: int) -> None:
    found: dict[str, list[float]] = {"default": [], "balanced": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            for sampler in found:
                found[sampler].extend(trainer_run(sampler, steps, Path(tmp)))
    print(f"trainer (2 processes, gloo, tiny Llama, {steps} steps x {repeats} interleaved runs, first step dropped): "
          f"default_step_ms_median={np.median(found['default']):.1f} "
          f"balanced_step_ms_median={np.median(found['balanced']):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="steps per corpus and scale")
    parser.add_argument("--trainer-steps", type=int, default=8)
    parser.add_argument("--trainer-repeats", type=int, default=3)
    args = parser.parse_args()
    predicted(args.steps)
    measured(args.trainer_steps, args.trainer_repeats)


if __name__ == "__main__":
    main()
