"""Kill a rank at random moments under ``torchrun --max-restarts``: does every run finish by
itself with the weights of an uninterrupted run?

Each run is ::

    torchrun --nproc-per-node 2 --max-restarts 2 -m hydraulis train --model tiny --strategy 1,1,2
             --steps 8 --checkpoint-dir D --checkpoint-every 2 --device cpu

with one worker ``SIGKILL``-ed at a random moment: after a random step's line (0 … 7) plus a
random 0–150 ms — some kills land while a checkpoint is written in the background. The script
prints each run's outcome (exit status, restarts, the step of the kill, whether the final
checkpoint's master weights are bitwise equal to the uninterrupted run's) and exits 1 when one
run fails. Bounded: ``--runs`` runs, each under a hang guard.

    python benchmarks/kill_soak.py [--runs 10] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from hydraulis.runtime.checkpoint.resume import find_checkpoint
from hydraulis.runtime.checkpoint.store import read_canonical

STEPS = 8
HANG_GUARD_S = 600
TRAIN = ["-m", "hydraulis", "--log-level", "info", "train", "--model", "tiny", "--strategy", "1,1,2", "--steps",
         str(STEPS), "--checkpoint-every", "2", "--device", "cpu", "--timeout-s", "30"]


def torchrun(root: Path, log: Path, restarts: int = 2) -> subprocess.Popen:
    """The job of the module docstring under torchrun (its own process group), output to ``log``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts",
               str(restarts), "--master-addr", "127.0.0.1", "--master-port", str(port), *TRAIN, "--checkpoint-dir",
               str(root)]
    with log.open("w") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)


def kill_a_worker(agent: subprocess.Popen, log: Path, after: str, delay_s: float, victim: int) -> bool:
    """Wait for ``after`` in the log, then ``delay_s``, then ``SIGKILL`` the ``victim``-th worker
    (by pid order); False when the job ended first."""
    started = time.monotonic()
    while after not in log.read_text():
        if agent.poll() is not None or time.monotonic() - started > HANG_GUARD_S:
            return False
        time.sleep(0.01)
    time.sleep(delay_s)
    workers = sorted(int(pid) for pid in subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True,
                                                        text=True).stdout.split())
    if len(workers) <= victim:
        return False
    os.kill(workers[victim], signal.SIGKILL)
    return True


def final_weights(root: Path) -> dict[str, torch.Tensor]:
    """The master weights of the newest checkpoint under ``root``."""
    resume = find_checkpoint(root)
    assert resume.manifest.step == STEPS, f"the newest checkpoint is after step {resume.manifest.step}"
    return read_canonical(resume.folder, resume.manifest)["master"]


def bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def finish(agent: subprocess.Popen) -> int:
    try:
        return agent.wait(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(agent.pid, signal.SIGKILL)
        return agent.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="torchrun jobs, each with one worker killed at a random moment (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments (default 0)")
    args = parser.parse_args()
    draw = random.Random(args.seed)
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kill-soak-") as scratch:
        scratch = Path(scratch)
        reference = torchrun(scratch / "reference", scratch / "reference.log", restarts=0)
        assert finish(reference) == 0, (scratch / "reference.log").read_text()[-3000:]
        expected = final_weights(scratch / "reference")
        for run in range(args.runs):
            root, log = scratch / f"run{run}", scratch / f"run{run}.log"
            step, delay, victim = draw.randrange(STEPS), draw.uniform(0.0, 0.15), draw.randrange(2)
            started = time.monotonic()
            agent = torchrun(root, log)
            killed = kill_a_worker(agent, log, f"step {step}  strategy", delay, victim)
            status = finish(agent)
            text = log.read_text()
            restarts = text.count("failed (exitcode")
            equal = status == 0 and bitwise_equal(final_weights(root), expected)
            failures += not (status == 0 and equal)
            print(f"run {run}: kill of worker {victim} after step {step} + {delay * 1e3:.0f} ms "
                  f"{'done' if killed else 'missed (the job had ended)'}; exit {status}, restarts {restarts}, "
                  f"{time.monotonic() - started:.1f} s, final weights {'bitwise equal' if equal else 'DIFFER'}",
                  flush=True)
    print(f"{args.runs - failures} of {args.runs} runs finished by themselves with the uninterrupted weights")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
