"""Throughput of ``POST /v1/step-plans`` on loopback.

Starts ``hydraulis serve --workers W`` on 127.0.0.1 (a free port), then ``--clients`` concurrent
clients send ``--requests`` step-plan requests in total — the 64-device example proposal, global
batches of ``--token-budget`` tokens sampled from the long-tail example workload — and prints
requests/s, p50/p90/p99 latency, the error count, and the CPU time per request of the service
(its process and its workers, from ``/proc``) and of the clients.

The clients share the machine with the service, so they are kept light: one persistent
``http.client`` connection per client thread (``httpx`` costs about 1 ms more CPU per request).
On a loaded machine requests/s and latency follow the load; the CPU times per request do much
less, so compare those across runs. Bounded in count and in time (``--max-seconds``); it stops
the server itself.

    python benchmarks/service_throughput.py [--requests 1000] [--clients 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.base.workload import sample_batches

ROOT = Path(__file__).resolve().parents[1]
ROUTE = "/v1/step-plans"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="planning worker processes of the service")
    parser.add_argument("--token-budget", type=int, default=200_000)
    parser.add_argument("--proposal", default=str(ROOT / "examples" / "proposals" / "7b_64dev.json"))
    parser.add_argument("--lengths", default=str(ROOT / "examples" / "data" / "longtail.txt"))
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--synthesise", choices=("off", "proposal", "space"), default="proposal",
                        help="the requests' per-step strategy synthesis (the route's default: proposal)")
    args = parser.parse_args()

    proposal = json.loads(Path(args.proposal).read_text())
    batches = sample_batches(read_lengths(args.lengths), args.token_budget, 64, proposal["max_seq_len"], seed=0)
    bodies = [json.dumps({"proposal": proposal, "lengths": b.tolist(), "synthesise": args.synthesise}).encode() for b in batches]
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "hydraulis", "serve", "--port", str(port), "--workers",
                               str(args.workers)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "HYDRAULIS_API_TOKEN": ""})
    try:
        _wait_ready(f"http://127.0.0.1:{port}", server)
        _drive(port, bodies[:args.clients], args.clients, args.clients, args.max_seconds)  # warm every worker
        server_cpu, client_cpu = _cpu_seconds(server.pid), _own_cpu_seconds()
        latencies, errors, wall = _drive(port, bodies, args.requests, args.clients, args.max_seconds)
        server_cpu, client_cpu = _cpu_seconds(server.pid) - server_cpu, _own_cpu_seconds() - client_cpu
    finally:
        server.terminate()
        server.wait(timeout=30)
    done = len(latencies)
    ms = np.array(latencies) * 1e3
    print(f"POST {ROUTE}: {done} requests ({errors} errors) from {args.clients} clients, {args.workers} workers, "
          f"synthesise={args.synthesise}, "
          f"{len(batches)} distinct batches of {args.token_budget} tokens, 64-device proposal; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"throughput {done / wall:.1f} requests/s; latency p50 {np.percentile(ms, 50):.1f} ms, "
          f"p90 {np.percentile(ms, 90):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms")
    print(f"CPU per request: service {server_cpu / done * 1e3:.2f} ms (its process and workers), "
          f"clients {client_cpu / done * 1e3:.2f} ms")


def _drive(port: int, bodies: list[bytes], requests: int, clients: int, max_seconds: float):
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.perf_counter() + max_seconds

    def client() -> None:
        nonlocal errors
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for i in counter:
            if time.perf_counter() > deadline:
                break
            start = time.perf_counter()
            connection.request("POST", ROUTE, body=bodies[i % len(bodies)],
                               headers={"content-type": "application/json"})
            response = connection.getresponse()
            response.read()
            with lock:
                latencies.append(time.perf_counter() - start)
                errors += response.status != 200
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, errors, time.perf_counter() - started


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its descendants now alive (Linux /proc)."""
    parent, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        process = int(stat.parent.name)
        parent[process], ticks[process] = int(fields[1]), int(fields[11]) + int(fields[12])
    family, grew = {pid}, True
    while grew:
        grown = family | {p for p, up in parent.items() if up in family}
        grew, family = grown != family, grown
    return sum(ticks.get(p, 0) for p in family) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_ready(url: str, server: subprocess.Popen, seconds: float = 60.0) -> None:
    import httpx

    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with status {server.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit("the server did not become ready in time")


if __name__ == "__main__":
    main()
