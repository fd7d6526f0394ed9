"""Run every benchmark and print its figures: planner latency, proposal time, plan quality and
service throughput. Each is its own script (run here as a subprocess, output streamed):

=========================  ==========================  =======================================
figure                     script                      what it prints
=========================  ==========================  =======================================
planner latency, quality   dispatch_latency.py         per-step dispatch time (median, p90) and
                                                       predicted / lower bound, per method
proposal time              proposal_time.py            proposal wall time; against the best
                                                       homogeneous strategy
plan quality               stage2_vs_ilp.py            greedy stage-2 packing against the ILP
synthesis, bounds          synthesis_quality.py        compute / pool bound, predicted / tight
                                                       bound, planning time, communicators;
                                                       the least compute part of any plan
plan-step latency          plan_step_latency.py        planning time with synthesis (median,
                                                       p90) at 32, 64 and 1,024 devices
service throughput         service_throughput.py       requests/s, p50/p99 and CPU per request
                                                       of POST /v1/step-plans on loopback
service under a burst      service_burst.py            answers to 200 concurrent mixed valid and
                                                       invalid requests; healthy afterwards
attention scaling          attention_scaling.py        the runtime's CPU attention on 32K tokens
                                                       as 2,048 × 16 and 64 × 512 documents
=========================  ==========================  =======================================

A script that is not there yet is skipped with a message. ``--quick`` runs smaller sizes.

    .venv/bin/python benchmarks/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    ("planner latency and plan quality", "dispatch_latency.py", ("--steps", "100"), ("--steps", "20")),
    ("proposal time", "proposal_time.py", ("--repeat", "3"), ("--repeat", "1")),
    ("plan quality: greedy packing against the ILP", "stage2_vs_ilp.py", (), ("--instances", "3", "--nodes", "200")),
    ("per-step synthesis against the bounds, communicators", "synthesis_quality.py", ("--steps", "100"),
     ("--steps", "10", "--cases", "7b_32dev")),
    ("plan-step latency with per-step synthesis", "plan_step_latency.py", ("--steps", "100"),
     ("--steps", "10", "--cases", "7b_32dev")),
    ("service throughput", "service_throughput.py", (), ("--requests", "200")),
    ("service under a burst", "service_burst.py", (), ("--requests", "60")),
    ("attention scaling", "attention_scaling.py", (), ("--repeats", "1")),
    ("fidelity: the e2e example measured against the cost model", "fidelity.py", (), ("--steps", "4", "--cycle-steps", "6")),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a fast look")
    args = parser.parse_args()
    results = []
    for title, script, full, quick in BENCHMARKS:
        path = HERE / script
        print(f"\n=== {title}: benchmarks/{script} {' '.join(quick if args.quick else full)}", flush=True)
        if not path.exists():
            print(f"skipped: benchmarks/{script} does not exist yet", flush=True)
            results.append((title, script, "skipped", 0.0))
            continue
        started = time.perf_counter()
        code = subprocess.run([sys.executable, str(path), *(quick if args.quick else full)], cwd=HERE.parent).returncode
        results.append((title, script, "ok" if code == 0 else f"failed ({code})", time.perf_counter() - started))
    print("\n=== summary")
    for title, script, status, wall in results:
        print(f"{title:46s} {script:24s} {status:12s} {wall:7.1f} s")
    return 0 if all(r[2] in ("ok", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
