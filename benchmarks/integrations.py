"""Hydraulis inside other runtimes: Megatron-Core's hybrid CP scheduler against ours on the cost
model, and the Hugging Face ``Trainer`` measured with the default sampler and with ours.

Part 1 (predicted, docs/integrations.md): ``--seeds`` batches of lognormal(7.5, 1.2) lengths
capped at 65,536 — 64 samples on 8 DP×CP ranks and 512 on 64 — are planned by megatron-core's
``BalancedCPScheduler`` and by ``HydraulisCPScheduler`` with ``max_seq_len_per_rank`` 8,192 (LLaMA-7B
analytic on H100s, tp 8, every power-of-two CP size). Both plans are priced by
:func:`~hydraulis.integrations.cp_groups.cp_step_ms`, the fixed cost once per sub-sample (as
Megatron's schedule runs them; also once per rank and group); printed: Megatron ÷ ours (median,
minimum), each scheduler's planning time (median over batches of the least of ``--repeats``
interleaved runs), and Megatron ÷ the fluid bound ``Σ_i k_i·t_{k_i}(s_i)/n`` — the most any plan
can gain over Megatron's; and ``never_worse=True`` (both planned, the cheaper kept). Part 2
(measured on this CPU): 2-process ``Trainer`` runs of ``examples/trainer_balanced.py`` — one epoch,
every run on the same global batches, both splits feeding the same packed collator
(``DataCollatorWithFlattening``), ours on the cost model packing has there — ``--trainer-repeats`` times: a run with the default loader and one with ours
(interleaved, their first step dropped; ``default / ours`` also batch by batch, the same
batch of the same repeat), then one *alternating* run, every batch once with each
split in adjacent steps, which on a shared machine is the steadier comparison. Medians of the
step times, and of ``default / ours`` batch by batch. Part 3 (dp-split, predicted): the same batches
of 64 capped at 8,192 dealt to 8 DP ranks in 8 rows each as torchtitan's loader deals them
(``rank_micro_batches`` with ``micro_batches``), against the round-robin split, on the cost model.

    python benchmarks/integrations.py [--seeds 16] [--repeats 3] [--trainer-repeats 3]
                                      [--parts predicted trainer dp-split sweep]
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

from hydraulis.base.presets import device_preset, model_preset
from hydraulis.base.specs import Cluster
from hydraulis.base.types import Scheme
from hydraulis.integrations.cp_groups import CPGroups, FixedCost, cp_step_ms
from hydraulis.integrations.megatron import HydraulisCPScheduler
from hydraulis.integrations.rank_batches import rank_micro_batches
from hydraulis.profiler.analytic import analytic_scheme_space

SCALES = ((8, 64), (64, 512))
"""(DP×CP ranks, samples per batch)."""
MODEL, DEVICE, TP = "llama-7b", "h100-80g", 8
PER_RANK = 8_192
LONGEST = 65_536
ROOT = Path(__file__).resolve().parents[1]


class Group:
    def __init__(self, size: int) -> None:
        self._size = size

    def size(self) -> int:
        return self._size


def lognormal_batch(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(7.5, 1.2, count).astype(np.int64) + 1, LONGEST)


def predicted(seeds: int, repeats: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.pipeline_parallel.hybrid_cp_schedule import (
            BalancedCPScheduler,
        )
    for ranks, count in SCALES:
        space = cp_space(ranks)
        ours = HydraulisCPScheduler(PER_RANK, Group(ranks), space=space, tp=TP)
        guarded = HydraulisCPScheduler(PER_RANK, Group(ranks), space=space, tp=TP, never_worse=True)
        ratios: dict[FixedCost, list[float]] = {f: [] for f in FixedCost}
        bound, guarded_ratios, planning = [], [], {"ours": [], "megatron": [], "never_worse": []}
        for seed in range(seeds):
            batch = lognormal_batch(count, seed)
            pairs = list(enumerate(batch.tolist()))
            times: dict[str, list[float]] = {"ours": [], "megatron": [], "never_worse": []}
            for _ in range(repeats):
                started = time.perf_counter()
                _, mine = ours.get_groups_and_subsamples(pairs, None)
                planned = time.perf_counter()
                _, theirs = BalancedCPScheduler(PER_RANK, Group(ranks)).get_groups_and_subsamples(pairs, None)
                compared = time.perf_counter()
                _, kept = guarded.get_groups_and_subsamples(pairs, None)
                times["ours"].append((planned - started) * 1e3)
                times["megatron"].append((compared - planned) * 1e3)
                times["never_worse"].append((time.perf_counter() - compared) * 1e3)
            for name, found in times.items():
                planning[name].append(min(found))
            plans = [CPGroups(tuple(tuple(tuple(r) for r in g) for g in ids)) for ids in (mine, theirs, kept)]
            guarded_ratios.append(cp_step_ms(plans[1], batch, ours.ranks) / cp_step_ms(plans[2], batch, ours.ranks))
            for fixed in FixedCost:
                a, b = (cp_step_ms(p, batch, ours.ranks, fixed) for p in plans[:2])
                ratios[fixed].append(b / a)
            bound.append(cp_step_ms(plans[1], batch, ours.ranks) / fluid_bound(ours.ranks, batch))
        per_sample = ratios[FixedCost.SUBSAMPLE]
        print(f"hybrid CP, {MODEL} on {DEVICE}, tp {TP}, {ranks} ranks, {count} lognormal(7.5, 1.2) samples capped at "
              f"{LONGEST}, {PER_RANK} per rank, {seeds} seeds: megatron_over_ours median={np.median(per_sample):.3f} "
              f"min={min(per_sample):.3f} (fixed cost per group: median={np.median(ratios[FixedCost.GROUP]):.3f} "
              f"min={min(ratios[FixedCost.GROUP]):.3f}) planning_ms_median ours={np.median(planning['ours']):.2f} "
              f"megatron={np.median(planning['megatron']):.2f} megatron_over_fluid_bound median={np.median(bound):.3f}; "
              f"never_worse=True: megatron_over_ours median={np.median(guarded_ratios):.3f} "
              f"min={min(guarded_ratios):.3f} planning_ms_median={np.median(planning['never_worse']):.2f}")


def cp_space(ranks: int):
    """The analytic space of the benchmark's model on ``ranks`` DP×CP ranks, every power-of-two CP size."""
    spec = device_preset(DEVICE)
    return analytic_scheme_space(model_preset(MODEL), spec, Cluster(ranks * TP, spec.devices_per_node, spec.name),
                                 tuple(2 ** i for i in range(ranks.bit_length())), (TP,), (1,),
                                 created="benchmark", tool_version="benchmark")


def sweep(seeds: int, repeats: int) -> None:
    """Part 4: both schedulers on batches drawn from three length pools, for every
    ``max_seq_len_per_rank`` of 4,096–16,384 and 8–64 ranks (8 samples a rank), lengths capped at
    what the ranks hold; one line per setting, then the least Megatron ÷ ours over all."""
    import sysconfig

    from hydraulis.artifacts import read_lengths

    stdlib = sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py"))
    pools = {"longtail.txt": np.asarray(read_lengths(ROOT / "examples" / "data" / "longtail.txt")),
             "stdlib_bytes/4": np.array([max(1, f.stat().st_size // 4) for f in stdlib]),
             "lognormal(7.5,1.2)": lognormal_batch(20_000, 0)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.pipeline_parallel.hybrid_cp_schedule import BalancedCPScheduler
    least = np.inf
    for per_rank in (16_384, 8_192, 4_096):
        for ranks in (8, 16, 32, 64):
            ours = HydraulisCPScheduler(per_rank, Group(ranks), space=cp_space(ranks), tp=TP)
            for name, pool in pools.items():
                pool = np.minimum(pool, ours.ranks.longest)
                ratios, planning = [], {"ours": [], "megatron": []}
                for seed in range(seeds):
                    batch = np.random.default_rng(seed).choice(pool, 8 * ranks)
                    pairs = list(enumerate(batch.tolist()))
                    step_ms = {}
                    for who, scheduler in (("ours", ours), ("megatron", BalancedCPScheduler(per_rank, Group(ranks)))):
                        times = []
                        for _ in range(repeats):
                            started = time.perf_counter()
                            _, ids = scheduler.get_groups_and_subsamples(pairs, None)
                            times.append((time.perf_counter() - started) * 1e3)
                        planning[who].append(min(times))
                        step_ms[who] = cp_step_ms(CPGroups(tuple(tuple(tuple(r) for r in g) for g in ids)), batch,
                                                  ours.ranks)
                    ratios.append(step_ms["megatron"] / step_ms["ours"])
                least = min(least, min(ratios))
                print(f"sweep {per_rank} per rank, {ranks} ranks, {name}: megatron_over_ours median="
                      f"{np.median(ratios):.3f} min={min(ratios):.3f} planning_ms_median "
                      f"ours={np.median(planning['ours']):.2f} megatron={np.median(planning['megatron']):.2f}")
    print(f"sweep: least megatron_over_ours {least:.4f}")


def fluid_bound(ranks, batch: np.ndarray) -> float:
    """``Σ_i k_i·t_{k_i}(s_i) / n``, ``k_i`` the narrowest option holding sample ``i``: no plan is faster
    (``k·t_k(s)`` grows with ``k``)."""
    total = 0.0
    for s in batch.tolist():
        option = next(o for o in ranks.options if o.capacity >= s)
        total += option.cp * option.ms(s)
    return total / ranks.ranks


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


def dp_split(seeds: int, ranks: int = 8, rows: int = 8) -> None:
    """Part 3: max-rank time ``rows·c + Σ_{i∈r} (a·s_i² + b·s_i)`` of the round-robin split over ours,
    and ours over the fluid bound ``rows·c + Σ_i (a·s_i² + b·s_i) / R``."""
    spec = device_preset(DEVICE)
    space = analytic_scheme_space(model_preset(MODEL), spec, Cluster(ranks * TP, spec.devices_per_node, spec.name),
                                  (1,), (TP,), (1,), created="benchmark", tool_version="benchmark")
    time = space.profile(Scheme(1, TP, 1)).time
    over_round_robin, over_fluid = [], []
    for seed in range(seeds):
        batch = np.minimum(lognormal_batch(64, seed), PER_RANK)
        work = time.a * batch.astype(float) ** 2 + time.b * batch
        plan = rank_micro_batches(batch, ranks, time, PER_RANK, rows)
        ours = rows * time.c + max(sum(work[i] for mb in rank for i in mb) for rank in plan)
        over_round_robin.append((rows * time.c + max(work[r::ranks].sum() for r in range(ranks))) / ours)
        over_fluid.append(ours / (rows * time.c + work.sum() / ranks))
    print(f"dp split, {MODEL} on {DEVICE}, tp {TP}, {ranks} DP ranks x {rows} rows of {PER_RANK}, 64 lognormal(7.5, 1.2) "
          f"samples capped at {PER_RANK}, {seeds} seeds: round_robin_over_ours median={np.median(over_round_robin):.3f} "
          f"min={min(over_round_robin):.3f} ours_over_fluid_bound median={np.median(over_fluid):.3f} "
          f"max={max(over_fluid):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16, help="batches per scale")
    parser.add_argument("--repeats", type=int, default=3, help="plans per batch and scheduler (the least time kept)")
    parser.add_argument("--trainer-steps", type=int, default=12, help="Trainer steps per run (one epoch)")
    parser.add_argument("--trainer-repeats", type=int, default=3, help="runs per sampler, interleaved")
    parser.add_argument("--trainer-batch-size", type=int, default=32, help="sequences per Trainer step")
    parser.add_argument("--trainer-longest", type=int, default=2048, help="longest Trainer sequence (tokens)")
    parser.add_argument("--parts", nargs="+", choices=("predicted", "trainer", "dp-split", "sweep"),
                        default=["predicted", "trainer", "dp-split"],
                        help="which parts to run (default all but sweep)")
    args = parser.parse_args()
    if "predicted" in args.parts:
        predicted(args.seeds, args.repeats)
    if "trainer" in args.parts:
        measured(args.trainer_steps, args.trainer_repeats, args.trainer_batch_size, args.trainer_longest)
    if "dp-split" in args.parts:
        dp_split(args.seeds)
    if "sweep" in args.parts:
        sweep(args.seeds, args.repeats)


if __name__ == "__main__":
    main()
