"""A rank killed mid-training: every other rank exits with an error, within 60 s, on its own.

The ranks are started as separate processes with torchrun's environment variables (no launcher
that could end them), each running ``hydraulis train``; once steps are running, one is killed
with SIGKILL. The subprocess timeout is the failure signal for a hang."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.distributed

WORLD = 3
VICTIM = 1
START_LIMIT_S = 300


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_killing_one_rank_ends_every_other_rank_with_an_error(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "hydraulis", "--log-level", "info", "train", "--model", "tiny",
               "--strategy", "1,1,2+1,1,1", "--steps", "100000", "--device", "cpu", "--timeout-s", "30"]
    logs = [tmp_path / f"rank{r}.log" for r in range(WORLD)]
    ranks = []
    for rank, log in enumerate(logs):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        with log.open("w") as sink:
            ranks.append(subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT))
    try:
        started = time.monotonic()
        while "step 1 " not in logs[0].read_text():
            assert all(p.poll() is None for p in ranks), [log.read_text()[-2000:] for log in logs]
            assert time.monotonic() - started < START_LIMIT_S, "training never started"
            time.sleep(0.2)
        ranks[VICTIM].send_signal(signal.SIGKILL)
        for rank, process in enumerate(ranks):
            if rank == VICTIM:
                continue
            assert process.wait(timeout=60) != 0, logs[rank].read_text()[-2000:]
            assert f"rank {rank} failed" in logs[rank].read_text()
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait()
