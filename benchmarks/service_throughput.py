"""Throughput of ``POST /v1/step-plans`` on loopback.

Starts ``hydraulis serve`` on 127.0.0.1 (a free port), then ``--clients`` concurrent clients
send ``--requests`` step-plan requests in total — the 64-device example proposal, global
batches of ``--token-budget`` tokens sampled from the long-tail example workload — and prints
requests/s, p50/p90/p99 latency and the error count. Bounded in count and in time
(``--max-seconds``); it stops the server itself.

    python benchmarks/service_throughput.py [--requests 1000] [--clients 8] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from hydraulis.artifacts import read_lengths
from hydraulis.workload import sample_batches

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--token-budget", type=int, default=200_000)
    parser.add_argument("--proposal", default=str(ROOT / "examples" / "proposals" / "7b_64dev.json"))
    parser.add_argument("--lengths", default=str(ROOT / "examples" / "data" / "longtail.txt"))
    parser.add_argument("--max-seconds", type=float, default=300.0)
    args = parser.parse_args()

    proposal = json.loads(Path(args.proposal).read_text())
    batches = sample_batches(read_lengths(args.lengths), args.token_budget, 64, proposal["max_seq_len"], seed=0)
    bodies = [json.dumps({"proposal": proposal, "lengths": b.tolist()}).encode() for b in batches]
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "hydraulis", "serve", "--port", str(port), "--workers",
                               str(args.workers)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "HYDRAULIS_API_TOKEN": ""})
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, server)
        latencies, errors, wall = _drive(url, bodies, args.requests, args.clients, args.max_seconds)
    finally:
        server.terminate()
        server.wait(timeout=30)
    done = len(latencies)
    ms = np.array(latencies) * 1e3
    print(f"POST /v1/step-plans: {done} requests ({errors} errors) from {args.clients} clients, "
          f"{args.workers} workers, {len(batches)} distinct batches of {args.token_budget} tokens, "
          f"64-device proposal; {os.cpu_count()} CPUs")
    print(f"throughput {done / wall:.1f} requests/s; latency p50 {np.percentile(ms, 50):.1f} ms, "
          f"p90 {np.percentile(ms, 90):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms")


def _drive(url: str, bodies: list[bytes], requests: int, clients: int, max_seconds: float):
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.perf_counter() + max_seconds

    def client() -> None:
        nonlocal errors
        with httpx.Client(base_url=url, timeout=60.0, headers={"content-type": "application/json"}) as http:
            for i in counter:
                if time.perf_counter() > deadline:
                    return
                start = time.perf_counter()
                response = http.post("/v1/step-plans", content=bodies[i % len(bodies)])
                with lock:
                    latencies.append(time.perf_counter() - start)
                    errors += response.status_code != 200

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, errors, time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_ready(url: str, server: subprocess.Popen, seconds: float = 60.0) -> None:
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
