"""A burst of concurrent mixed requests against ``hydraulis serve``: does the service shed load
instead of failing?

Starts ``hydraulis serve --workers W --queue Q`` on 127.0.0.1 (a free port), then sends
``--requests`` requests at once, on as many connections: valid step plans of the 64-device example
proposal (batches of ``--token-budget`` tokens from the long-tail example workload) mixed with
invalid ones (a negative length, an unknown method, a token budget of 1e19, malformed JSON, an
empty body). Prints the count of each answer per kind of request and checks, exiting 1 when one
fails:

* no 5xx but 503, and every 503 carries ``Retry-After``;
* every valid step plan that was admitted (not 503) succeeded and places every sequence once;
* every invalid request that was admitted got a 4xx;
* afterwards the service is healthy: ``/healthz`` answers, ``/readyz`` shows no request admitted,
  and a valid step plan succeeds.

Bounded in count and time; it stops the server itself.

    python benchmarks/service_burst.py [--requests 200] [--workers 2] [--queue 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from hydraulis.artifacts import read_lengths
from hydraulis.base.workload import sample_batches

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from service_throughput import _free_port, _wait_ready  # noqa: E402  (the sibling script's helpers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="planning worker processes")
    parser.add_argument("--queue", type=int, default=64, help="requests admitted to wait for a worker")
    parser.add_argument("--token-budget", type=int, default=200_000)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    args = parser.parse_args()

    proposal = json.loads((ROOT / "examples" / "proposals" / "7b_64dev.json").read_text())
    batches = sample_batches(read_lengths(ROOT / "examples" / "data" / "longtail.txt"), args.token_budget, 16,
                             proposal["max_seq_len"], seed=0)
    requests = [_request(i, proposal, batches) for i in range(args.requests)]
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "hydraulis", "serve", "--port", str(port), "--workers",
                               str(args.workers), "--queue", str(args.queue)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "HYDRAULIS_API_TOKEN": ""})
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, server)
        answers = asyncio.run(asyncio.wait_for(_burst(url, requests), args.max_seconds))
        health = _health(url, proposal, batches[0])
    finally:
        server.terminate()
        server.wait(timeout=30)
    problems = _report(requests, answers, health, args)
    for problem in problems:
        print(f"FAILED: {problem}")
    raise SystemExit(1 if problems else 0)


def _request(i: int, proposal: dict, batches: list) -> tuple[str, str, bytes]:
    """(kind, path, body) of request ``i``: two in three valid step plans, the rest invalid."""
    batch = batches[i % len(batches)].tolist()
    kinds = [
        ("valid step plan", "/v1/step-plans", {"proposal": proposal, "lengths": batch}),
        ("valid step plan", "/v1/step-plans", {"proposal": proposal, "lengths": batch, "method": "fixed_packing"}),
        ("negative length", "/v1/step-plans", {"proposal": proposal, "lengths": [*batch, -5]}),
        ("valid step plan", "/v1/step-plans", {"proposal": proposal, "lengths": batch[: len(batch) // 2]}),
        ("unknown method", "/v1/step-plans", {"proposal": proposal, "lengths": batch, "method": "magic"}),
        ("token budget 1e19", "/v1/proposals", {"scheme_space": {}, "devices": 64, "devices_per_node": 8,
                                               "token_budget": 1e19, "max_seq_len": 4096, "lengths": [100]}),
    ]
    if i % 25 == 24:
        return "malformed JSON", "/v1/step-plans", b'{"proposal": '
    if i % 25 == 23:
        return "empty body", "/v1/step-plans", b""
    kind, path, body = kinds[i % len(kinds)]
    return kind, path, json.dumps(body).encode()


async def _burst(url: str, requests: list[tuple[str, str, bytes]]) -> list[httpx.Response | Exception]:
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=120.0, limits=limits,
                                 headers={"content-type": "application/json"}) as http:
        return await asyncio.gather(*(http.post(path, content=body) for _, path, body in requests),
                                    return_exceptions=True)


def _health(url: str, proposal: dict, batch) -> dict[str, object]:
    with httpx.Client(base_url=url, timeout=60.0) as http:
        plan = http.post("/v1/step-plans", json={"proposal": proposal, "lengths": batch.tolist()})
        return {"healthz": http.get("/healthz").status_code, "admitted": http.get("/readyz").json()["admitted"],
                "step plan": plan.status_code}


def _report(requests, answers, health, args) -> list[str]:
    counts: dict[str, Counter] = {}
    problems = []
    for (kind, _, body), answer in zip(requests, answers):
        status = f"{type(answer).__name__}" if isinstance(answer, Exception) else answer.status_code
        counts.setdefault(kind, Counter())[status] += 1
        if isinstance(answer, Exception):
            problems.append(f"{kind}: {answer!r}")
        elif status == 503 and "retry-after" not in answer.headers:
            problems.append(f"{kind}: 503 without Retry-After")
        elif status >= 500 and status != 503:
            problems.append(f"{kind}: {status} {answer.text[:200]}")
        elif kind == "valid step plan" and status != 503:
            if status != 200:
                problems.append(f"{kind}: admitted but answered {status} {answer.text[:200]}")
            else:
                placed = sorted(i for p in answer.json()["pipelines"] for mb in p["micro_batches"]
                                for i in mb["sequences"])
                if placed != list(range(len(json.loads(body)["lengths"]))):
                    problems.append(f"{kind}: a sequence was not placed exactly once")
        elif kind != "valid step plan" and status != 503 and not 400 <= status < 500:
            problems.append(f"{kind}: answered {status}")
    if health != {"healthz": 200, "admitted": 0, "step plan": 200}:
        problems.append(f"not healthy afterwards: {health}")
    print(f"{len(requests)} concurrent requests against hydraulis serve --workers {args.workers} --queue "
          f"{args.queue}; {os.cpu_count()} CPUs")
    for kind, counter in sorted(counts.items()):
        print(f"  {kind:18s} " + ", ".join(f"{status}: {n}" for status, n in sorted(counter.items(), key=str)))
    print(f"  afterwards: healthz {health['healthz']}, admitted {health['admitted']}, "
          f"a valid step plan {health['step plan']}")
    return problems


if __name__ == "__main__":
    main()
