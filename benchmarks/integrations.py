"""Hydraulis inside other runtimes: Megatron-Core's hybrid CP scheduler against ours on the cost
model, and the Hugging Face ``Trainer`` measured with the default sampler and with ours.

Part 1 (predicted, design §6 per rank, docs/integrations.md): long-tailed steps (synthetic:
``examples/data/longtail.txt``'s distribution; the standard-library corpus: its files' byte
counts / 4 as token counts) are planned by megatron-core's ``BalancedCPScheduler`` and by
``HydraulisCPScheduler`` with the same ``max_seq_len_per_rank`` (the least ``S_k/k`` of the
space's ``(k, 8, 1)``, so both plans fit memory), at 64 DP×CP ranks (LLaMA-7B, A800) and
1,024 (LLaMA-32B, H100), tp 8, analytic spaces; both plans are timed by
:func:`~hydraulis.integrations.cp_groups.cp_step_ms` with the fixed cost per sub-sample (as
Megatron's schedule runs them) and per group; each scheduler's planning time per step is
printed too (ours searches only the step's useful CP sizes, :meth:`CPRanks.useful`, though the
space lists every power of two). Part 2 (measured on this CPU): 2-process ``Trainer`` runs of
``examples/trainer_balanced.py`` — one epoch, every run on the same global batches, both splits
feeding the same packed collator (``DataCollatorWithFlattening``), ours on the cost model packing
has there — ``--trainer-repeats`` times: a run with the default loader and one with ours
(interleaved, their first step dropped; ``default / ours`` also batch by batch, the same
batch of the same repeat), then one *alternating* run, every batch once with each
split in adjacent steps, which on a shared machine is the steadier comparison. Medians of the
step times, and of ``default / ours`` batch by batch.

    python benchmarks/integrations.py [--steps 8] [--trainer-repeats 3] [--trainer-batch-size 32] [--parts predicted trainer]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
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
            planning = {"ours": [], "megatron": []}
            for batch in sample_batches(lengths, ranks * per_rank, steps, MAX_LEN, seed=1):
                pairs = list(enumerate(batch.tolist()))
                started = time.perf_counter()
                _, mine = ours.get_groups_and_subsamples(pairs, None)
                planned = time.perf_counter()
                _, theirs = BalancedCPScheduler(per_rank_len, Group(ranks)).get_groups_and_subsamples(pairs, None)
                planning["ours"].append((planned - started) * 1e3)
                planning["megatron"].append((time.perf_counter() - planned) * 1e3)
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
                  f"(fixed cost per group: {np.median(ratios[FixedCost.GROUP]):.2f}) "
                  f"planning_ms_median hydraulis={np.median(planning['ours']):.0f} "
                  f"megatron={np.median(planning['megatron']):.0f}")


def trainer_run(sampler: str, steps: int, shape: list[str], workdir: Path) -> dict:
    """One 2-process run of the example with ``sampler``: rank 0's ``step_ms`` and ``splits``."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = workdir / f"{sampler}.json"
    out.unlink(missing_ok=True)
    logs = [workdir / f"{sampler}.{r}.log" for r in range(2)]
    ranks = []
    for r, log in enumerate(logs):
        with log.open("w") as handle:
            ranks.append(subprocess.Popen(
                [sys.executable, str(ROOT / "examples/trainer_balanced.py"), "--sampler", sampler, "--steps", str(steps),
                 *shape, "--out", str(out), "--workdir", str(workdir / "work")],
                env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                         MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)),
                stdout=subprocess.DEVNULL, stderr=handle))
    for rank in ranks:
        rank.wait(timeout=600)
    if any(rank.returncode for rank in ranks):
        raise SystemExit(f"trainer run with the {sampler} sampler failed:\n{logs[0].read_text()[-2000:]}")
    return json.loads(out.read_text())


def measured(steps: int, repeats: int, batch_size: int, longest: int) -> None:
    """Both samplers on the same global batches: separate runs, interleaved (the first step of a
    run dropped), and alternating runs, where a batch's ``default / balanced`` pairs its two
    adjacent steps (the first batch dropped)."""
    shape = ["--batch-size", str(batch_size), "--longest", str(longest)]
    runs: dict[str, list[list[float]]] = {"default": [], "balanced": []}
    alternating: dict[str, list[float]] = {"default": [], "balanced": []}
    paired: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for sampler in (list(runs) if repeat % 2 == 0 else list(reversed(runs))):
                runs[sampler].append(trainer_run(sampler, steps, shape, Path(tmp))["step_ms"][1:])
            found = trainer_run("alternating", steps, shape, Path(tmp))
            pairs = list(zip(found["splits"], found["step_ms"]))[2:]
            for first, second in zip(pairs[0::2], pairs[1::2]):
                times = dict((first, second))
                alternating["default"].append(times["default"])
                alternating["balanced"].append(times["balanced"])
                paired.append(times["default"] / times["balanced"])
    where = (f"2 processes, gloo, tiny Llama, packed, {batch_size} sequences of at most {longest} tokens per step, "
             f"{steps} batches, {repeats} repeats")
    separate = [d / b for ours, theirs in zip(runs["balanced"], runs["default"]) for d, b in zip(theirs, ours)]
    print(f"trainer, separate runs interleaved ({where}): "
          f"default_step_ms_median={np.median([ms for run in runs['default'] for ms in run]):.1f} "
          f"balanced_step_ms_median={np.median([ms for run in runs['balanced'] for ms in run]):.1f} "
          f"default_over_balanced_per_batch_median={np.median(separate):.2f}")
    print(f"trainer, alternating steps ({where}): default_step_ms_median={np.median(alternating['default']):.1f} "
          f"balanced_step_ms_median={np.median(alternating['balanced']):.1f} "
          f"default_over_balanced_per_batch_median={np.median(paired):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8, help="steps per corpus and scale")
    parser.add_argument("--trainer-steps", type=int, default=12, help="Trainer steps per run (one epoch)")
    parser.add_argument("--trainer-repeats", type=int, default=3, help="runs per sampler, interleaved")
    parser.add_argument("--trainer-batch-size", type=int, default=32, help="sequences per Trainer step")
    parser.add_argument("--trainer-longest", type=int, default=2048, help="longest Trainer sequence (tokens)")
    parser.add_argument("--parts", nargs="+", choices=("predicted", "trainer"), default=["predicted", "trainer"],
                        help="which parts to run (default both)")
    args = parser.parse_args()
    if "predicted" in args.parts:
        predicted(args.steps)
    if "trainer" in args.parts:
        measured(args.trainer_steps, args.trainer_repeats, args.trainer_batch_size, args.trainer_longest)


if __name__ == "__main__":
    main()
