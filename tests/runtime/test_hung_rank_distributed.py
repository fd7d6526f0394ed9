"""A stopped rank (``SIGSTOP``, a hang no error reports) ends a local job: the launcher's watch
of the heartbeat files sees it silent for ``--timeout-s`` and ends every rank — rank 0 as well as
any other, data-parallel or pipeline; without a launcher, the survivor names the stopped rank 0
itself. The wait below is only a hang guard (far below torch's
30-minute default, far above the 5 s asked for), so a loaded machine does not fail the test."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runtime.test_failure_distributed import start_ranks, stop

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

HANG_GUARD_S = 180
STOPPED_AFTER = 3


def session_processes(session: int) -> list[tuple[int, str, str]]:
    """``(pid, state, command)`` of every process of ``session`` (from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[3]) == session:
            found.append((int(entry.name), fields[0], command))
    return found


def local_ranks(launcher: int) -> list[int]:
    """The rank processes a local launcher started, in rank order: children of its fork server
    (start method ``forkserver``) or spawned children (``spawn``)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    commands = {pid: command for pid, _, command in session_processes(launcher)}
    servers = {pid for pid, command in commands.items() if parents.get(pid) == launcher and "forkserver" in command}
    return sorted(pid for pid, command in commands.items()
                  if parents.get(pid) in servers or (parents.get(pid) == launcher and "spawn_main" in command))


@pytest.mark.parametrize(("strategy", "victim"), [("1,1,1x2", 0), ("1,1,2", 1)])
def test_a_stopped_rank_ends_the_job_naming_it_and_its_last_step(tmp_path, strategy, victim):
    log = tmp_path / "job.log"
    with log.open("w") as sink:
        job = subprocess.Popen([sys.executable, "-m", "hydraulis", "--log-level", "info", "train", "--model", "tiny",
                                "--strategy", strategy, "--steps", "100000", "--device", "cpu", "--timeout-s", "5"],
                               stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = time.monotonic()
        while f"step {STOPPED_AFTER} " not in log.read_text():
            assert job.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() - started < HANG_GUARD_S, "training never reached step 3"
            time.sleep(0.1)
        ranks = local_ranks(job.pid)
        assert len(ranks) == 2, session_processes(job.pid)
        os.kill(ranks[victim], signal.SIGSTOP)
        assert job.wait(timeout=HANG_GUARD_S) != 0
        text = log.read_text()
        assert f"rank {victim} stopped responding: no heartbeat in" in text, text[-3000:]
        reported = re.search(r"last completed step (\d+)", text)
        assert reported and int(reported.group(1)) >= STOPPED_AFTER - 1, text[-3000:]
        for _ in range(50):  # multiprocessing's resource tracker ends once it sees the launcher gone
            running = [p for p in session_processes(job.pid) if p[1] != "Z"]
            if not running:
                break
            time.sleep(0.1)
        assert not running
    finally:
        for pid, _, _ in session_processes(job.pid):
            os.kill(pid, signal.SIGKILL)
        job.wait()


def test_without_a_launcher_a_stopped_rank_0_that_hosts_the_store_is_named(tmp_path):
    """torchrun's environment without its agent (rank 0 hosts the store): the survivor's
    collective times out, its heartbeat check does not wait for the stopped store host, and it
    exits naming rank 0."""
    arguments = ["--log-level", "info", "train", "--model", "tiny", "--strategy", "1,1,1x2", "--steps", "100000",
                 "--device", "cpu", "--timeout-s", "5"]
    ranks, logs = start_ranks(tmp_path, arguments, 2)
    try:
        started = time.monotonic()
        while f"step {STOPPED_AFTER} " not in logs[0].read_text():
            assert all(p.poll() is None for p in ranks), [log.read_text()[-2000:] for log in logs]
            assert time.monotonic() - started < HANG_GUARD_S, "training never reached step 3"
            time.sleep(0.1)
        ranks[0].send_signal(signal.SIGSTOP)
        assert ranks[1].wait(timeout=HANG_GUARD_S) != 0
        assert "rank 0 stopped responding (the store it hosts does not answer); rank 1 failed" in logs[1].read_text()
    finally:
        stop(ranks)
