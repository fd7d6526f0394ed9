"""Every figure a first GPU should give us, in one command, each step within 8 minutes on one
H100 or H200 (a short GPU loan).

    PYTHONPATH=. python benchmarks/gpu_check.py --out DIR            # on a CUDA machine, from a checkout
    PYTHONPATH=. python benchmarks/gpu_check.py --dry-run --out DIR  # the same steps on the CPU, tiny sizes

**Packages.** Beyond the machine's own torch, transformers and numpy it needs only
:data:`NEEDED` — ``pulp``, ``numba`` and ``tqdm`` (the planner and the packing) and ``pytest``
(the CUDA tests) — and checks for them before the first step. The runtime imports the service's
and the data pipeline's packages (fastapi, uvicorn, httpx, datasets, tokenizers, tensorboard)
only where they are used, and no step uses them.

Steps, each recorded with its outcome (a failing step is reported, the others still run; a
step that crashes, times out (:data:`STEP_S`) or whose command fails makes the exit status 1; a
measured figure that misses its prediction is a finding reported in its step):

1. **cuda tests**: ``pytest -m cuda`` on the test modules that hold ``cuda`` tests, found by
   their text, without the suite's conftest (whose property-test settings need the dev extras);
2. **throughput**: bf16 training of ``llama-1b`` on one device with our runtime (``hydraulis
   train --strategy 1,1,1``: steady-state tokens/s, the first, warm-up step excluded, from its
   summary) against ``transformers``' ``LlamaForCausalLM`` + ``torch.optim.AdamW(fused=True)``
   on steps of the same tokens, documents packed into one row with positions restarting per
   document (median after its first step); MFU = ``6·P·tokens/s / peak``, and their ratio;
3. **cases**: for each of :func:`cases` — ``tiny`` (4,096 tokens), ``llama-1b`` (16K-token steps
   of 4,096-token micro-batches), ``llama-1b`` 64K-token steps (16,384 max), ``llama-7b`` under
   ``1,1,1[recompute=full]`` (4,096 tokens) — ``hydraulis memory``'s prediction and the
   allocator's measured peak (``torch.cuda.max_memory_allocated`` over a short run in a process
   of its own), the steady step time and its prediction (the analytic model of the detected GPU's
   preset), and both ratios predicted/measured;
4. **profile**: ``hydraulis profile`` of scheme (1,1,1) and its fitted ``a, b, c``;
5. **attention kernels**: forward + backward of one packed micro-batch through
   :func:`~hydraulis.runtime.model.attention.packed_attention` with the device's fast kernel
   (CUDA: ``varlen``; CPU: ``cpu_flash``) and with ``math``.

``--out DIR`` receives ``gpu_check.json`` and ``gpu_check.md``. The dry run (``tiny``, fp32, a
few hundred tokens) runs every step and every case on the CPU (no allocator peak there). Never
run in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from hydraulis.base.presets import FALLBACK_GPU, device_preset, gpu_preset, model_preset
from hydraulis.base.types import MicroBatch
from hydraulis.runtime.model.attention import KernelKind, attention_kernel, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup

HYDRAULIS = [sys.executable, "-m", "hydraulis"]
ROOT = Path(__file__).resolve().parents[1]
NEEDED = ("pulp", "numba", "tqdm", "pytest")
"""Packages gpu_check needs beyond torch, transformers and numpy."""
STEP_S = 480
"""The most one step (or one case) may take: 8 minutes."""


def settings(dry_run: bool) -> dict:
    """The model, precision and sizes of the throughput and profile steps."""
    if dry_run:
        return {"model": "tiny", "precision": "fp32", "seq_len": 64, "tokens": 256, "steps": 4,
                "profile_lens": "32,64", "device": "cpu"}
    return {"model": "llama-1b", "precision": "bf16", "seq_len": 4096, "tokens": 16384, "steps": 12,
            "profile_lens": "1024,2048,4096", "device": detected_preset()}


def cases(dry_run: bool) -> dict[str, dict]:
    """Each case: model, strategy, tokens per step, longest sequence (= micro-batch tokens), steps."""
    if dry_run:
        small = {"model": "tiny", "tokens": 256, "seq_len": 64, "steps": 3}
        return {"tiny": {**small, "strategy": "1,1,1"}, "llama-1b": {**small, "strategy": "1,1,1"},
                "llama-1b-64k": {**small, "strategy": "1,1,1", "tokens": 512, "seq_len": 256},
                "llama-7b-recompute": {**small, "strategy": "1,1,1[recompute=full]"}}
    return {"tiny": {"model": "tiny", "strategy": "1,1,1", "tokens": 4096, "seq_len": 4096, "steps": 6},
            "llama-1b": {"model": "llama-1b", "strategy": "1,1,1", "tokens": 16384, "seq_len": 4096, "steps": 6},
            "llama-1b-64k": {"model": "llama-1b", "strategy": "1,1,1", "tokens": 65536, "seq_len": 16384, "steps": 4},
            "llama-7b-recompute": {"model": "llama-7b", "strategy": "1,1,1[recompute=full]", "tokens": 4096,
                                   "seq_len": 4096, "steps": 3}}


def detected_preset() -> str:
    return gpu_preset(torch.cuda.get_device_name(0)) or FALLBACK_GPU


def run(command: list[str], timeout: float = STEP_S) -> tuple[int, str]:
    """Exit status and combined output of ``command`` (124: it ran past ``timeout``)."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": path})
    except subprocess.TimeoutExpired as expired:
        return 124, f"timed out after {timeout:.0f} s: {' '.join(command)}\n{expired.output or ''}"
    return done.returncode, done.stdout + done.stderr


def cuda_test_modules() -> list[str]:
    """The test modules holding ``cuda`` tests (by their text: importing them is what we avoid)."""
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                  if "mark.cuda" in path.read_text())


def cuda_tests(config: dict) -> dict:
    modules = cuda_test_modules()
    code, out = run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", "--noconftest", "-p", "no:cacheprovider",
                     *modules])
    return {"exit": code, "modules": modules, "result": out.strip().splitlines()[-1] if out.strip() else ""}


def ours(config: dict, extra: list[str]) -> tuple[int, str]:
    return run([*HYDRAULIS, "train", "--model", config["model"], "--strategy", "1,1,1", "--nproc", "1",
                "--steps", str(config["steps"]), "--token-budget", str(config["tokens"]), "--max-seq-len",
                str(config["seq_len"]), "--micro-batch-tokens", str(config["seq_len"]), "--precision",
                config["precision"], *extra])


def throughput(config: dict, device: torch.device) -> dict:
    code, out = ours(config, [])
    every = re.search(r"([0-9.]+) tokens/s over all steps", out)
    steady = re.search(r"([0-9.]+) steady \(the first, warm-up step excluded\)", out)
    mine = float(steady.group(1)) if code == 0 and steady else None
    theirs = baseline_tokens_per_s(config, device)
    params = model_preset(config["model"]).params
    peak = device_preset(config["device"]).peak_tflops * 1e12
    return {"exit": code, "ours_tokens_per_s_steady": mine,
            "ours_tokens_per_s_all_steps": float(every.group(1)) if code == 0 and every else None,
            "transformers_tokens_per_s_steady": theirs,
            "ours_mfu_steady": 6 * params * mine / peak if mine else None,
            "transformers_mfu_steady": 6 * params * theirs / peak, "ratio_steady": mine / theirs if mine else None,
            "note": "steady: the first, warm-up step excluded" + ("" if code == 0 else f"; {out.strip()[-500:]}")}


def baseline_tokens_per_s(config: dict, device: torch.device) -> float:
    """``LlamaForCausalLM`` + fused AdamW on ``tokens`` per step in documents of ``seq_len / 4``
    tokens packed into one row (positions restart per document); the first step is warm-up."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from hydraulis.runtime.checkpoint.llama_mapping import hf_config

    dtype = torch.bfloat16 if config["precision"] == "bf16" else torch.float32
    names = {torch.bfloat16: "bfloat16", torch.float32: "float32"}
    model = LlamaForCausalLM(LlamaConfig(**hf_config(model_preset(config["model"]), names[dtype])))
    model = model.to(device=device, dtype=dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens, document = config["tokens"], max(1, config["seq_len"] // 4)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)
    positions = (torch.arange(tokens, device=device) % document).unsqueeze(0)
    times = []
    for _ in range(config["steps"]):
        started = time.perf_counter()
        loss = model(input_ids=ids, position_ids=positions, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    del model, optimizer
    return tokens / statistics.median(times[1:])


def case_outcomes(dry_run: bool, device_name: str) -> dict:
    """Step 3: every case's predicted and measured memory and step time (module docstring); on
    CUDA each case in a process of its own (the allocator's peak is the process's)."""
    outcomes = {}
    for name, case in cases(dry_run).items():
        if dry_run:
            outcome = case_outcome(case, dry_run, device_name)
        else:
            code, out = run([sys.executable, str(Path(__file__).resolve()), "--case", json.dumps(case),
                             "--device-name", device_name])
            lines = [line for line in out.splitlines() if line.startswith("{")]
            outcome = json.loads(lines[-1]) if code == 0 and lines else {**case, "exit": code,
                                                                       "error": out.strip()[-800:]}
        outcomes[name] = outcome
        print(f"  case {name}: {json.dumps(outcome)}", flush=True)
    return outcomes


def case_outcome(case: dict, dry_run: bool, device_name: str) -> dict:
    """One case in this process: ``hydraulis memory``'s prediction, then a short run on one
    device — the allocator's peak (CUDA), the median step time and prediction over the steps
    after the first (the warm-up) — and both ratios predicted/measured."""
    predicted = predicted_bytes(case, device_name)
    measured = measure_case(case, dry_run)
    peak, step_ms = measured["peak_bytes"], measured["steady_step_ms"]
    return {**case, "predicted_bytes": predicted, "measured_peak_bytes": peak,
            "memory_predicted_over_measured": predicted / peak if peak else None,
            "steady_step_ms": step_ms, "predicted_step_ms": measured["predicted_step_ms"],
            "time_predicted_over_measured": measured["predicted_step_ms"] / step_ms}


def predicted_bytes(case: dict, device_name: str) -> int:
    """The largest rank's total bytes as ``hydraulis memory`` prints them (its CLI, in process)."""
    from hydraulis.cli import main as hydraulis_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = hydraulis_main(["memory", "--model", case["model"], "--strategy", case["strategy"], "--devices", "1",
                               "--tokens", str(case["seq_len"]), "--device", device_name, "--format", "json"])
    if code:
        raise RuntimeError(f"hydraulis memory exited {code}")
    return max(rank["total_bytes"] for rank in json.loads(printed.getvalue())["ranks"])


def measure_case(case: dict, dry_run: bool) -> dict:
    """``case`` trained in this process on one device (on the CPU with one thread, as a rank)."""
    from hydraulis.job.config import RuntimeOptions, TrainConfig
    from hydraulis.runtime.launch import RankContext
    from hydraulis.runtime.run import resolve_run
    from hydraulis.runtime.trainer import train
    from hydraulis.sharding.kinds import DeviceKind, Precision

    cuda = not dry_run
    options = RuntimeOptions(device=DeviceKind.CUDA if cuda else DeviceKind.CPU,
                             precision=Precision.BF16 if cuda else Precision.FP32)
    config = TrainConfig(case["model"], (case["strategy"],), case["steps"], token_budget=case["tokens"],
                         max_seq_len=case["seq_len"], micro_batch_tokens=case["seq_len"], runtime=options)
    resolved = resolve_run(config, torch.cuda.get_device_name(0) if cuda else None)
    threads = torch.get_num_threads()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    else:
        torch.set_num_threads(1)
    try:
        records = train(RankContext.single(options), resolved, options).records[1:]
    finally:
        torch.set_num_threads(threads)
    return {"peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
            "steady_step_ms": statistics.median(r.step_ms for r in records),
            "predicted_step_ms": statistics.median(r.predicted_step_ms for r in records)}


def profile(config: dict, out_dir: Path) -> dict:
    space_file = out_dir / "profile_111.json"
    device = "cpu" if config["device"] == "cpu" else "cuda"
    code, out = run([*HYDRAULIS, "profile", "--model", config["model"], "--cp", "1", "--tp", "1", "--pp", "1",
                     "--seq-lens", config["profile_lens"], "--device", device, "--max-procs", "1",
                     "-o", str(space_file)])
    if code != 0:
        return {"exit": code, "error": out.strip()[-500:]}
    scheme = json.loads(space_file.read_text())["schemes"][0]
    return {"exit": 0, "coefficients": scheme.get("time", scheme), "summary": out.strip().splitlines()[-1]}


def attention(config: dict, device: torch.device) -> dict:
    """Median ms of forward + backward of one micro-batch of ``tokens`` in documents of
    ``seq_len / 4``, per kernel."""
    shape = model_preset(config["model"])
    dtype = torch.bfloat16 if config["precision"] == "bf16" else torch.float32
    length = max(1, config["seq_len"] // 4)
    documents = config["tokens"] // length
    micro_batch = MicroBatch(tuple(range(documents)), (length,) * documents)
    fast = attention_kernel(device, dtype)
    result = {}
    for kernel in dict.fromkeys((fast, KernelKind.MATH)):
        batch = pack_micro_batch([torch.zeros(length + 1, dtype=torch.long)] * documents, micro_batch, 1,
                                 ParallelGroup.single(), device, kernel)
        head = shape.hidden // shape.heads
        q = torch.randn(documents * length, shape.heads, head, device=device, dtype=dtype, requires_grad=True)
        k, v = (torch.randn(documents * length, shape.kv_heads, head, device=device, dtype=dtype, requires_grad=True)
                for _ in range(2))
        times = []
        for _ in range(4):
            started = time.perf_counter()
            packed_attention(q, k, v, batch.attention, kernel).sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            times.append((time.perf_counter() - started) * 1e3)
        result[kernel.value] = statistics.median(times[1:])
    return {"ms": result}


def markdown(report: dict) -> str:
    lines = [f"# GPU check ({'dry run, CPU' if report['dry_run'] else report['device_name']})", "",
             f"torch {report['torch']}, {report['seconds']:.0f} s; step seconds {report['step_seconds']}", ""]
    cases_ = report["steps"].get("cases", {})
    if cases_ and "error" not in cases_:
        lines += [("| case | predicted MB | measured peak MB | memory pred/meas | steady step ms | predicted ms "
                   "| time pred/meas |"), "|---|---|---|---|---|---|---|"]
        for name, c in cases_.items():
            cells = [c.get("predicted_bytes"), c.get("measured_peak_bytes")]
            mb = [f"{v / 1e6:.1f}" if v else "–" for v in cells]
            ratios = [f"{c[k]:.3f}" if c.get(k) else "–" for k in ("memory_predicted_over_measured",
                                                                   "time_predicted_over_measured")]
            times = [f"{c[k]:.1f}" if c.get(k) else "–" for k in ("steady_step_ms", "predicted_step_ms")]
            lines.append(f"| {name} | {mb[0]} | {mb[1]} | {ratios[0]} | {times[0]} | {times[1]} | {ratios[1]} |")
        lines.append("")
    for name, outcome in report["steps"].items():
        lines += [f"## {name}", "", "```", json.dumps(outcome, indent=2), "```", ""]
    return "\n".join(lines)


def missing_packages() -> list[str]:
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--dry-run", action="store_true", help="run every step on the CPU with the tiny model")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--device-name", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(case_outcome(json.loads(args.case), args.dry_run, args.device_name)))
        return
    if args.out is None:
        parser.error("--out is required")
    if not args.dry_run and not torch.cuda.is_available():
        parser.exit(2, "gpu_check: no CUDA device (use --dry-run on the CPU)\n")
    missing = missing_packages()
    if missing:
        parser.exit(2, f"gpu_check: needs {', '.join(missing)} (beyond torch, transformers, numpy: "
                       f"{', '.join(NEEDED)})\n")
    print(f"gpu_check: packages beyond torch, transformers, numpy: {', '.join(NEEDED)} (found)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    config = settings(args.dry_run)
    device = torch.device("cpu" if args.dry_run else "cuda")
    started = time.perf_counter()
    steps, seconds = {}, {}
    for name, step in (("cuda_tests", lambda: cuda_tests(config)), ("throughput", lambda: throughput(config, device)),
                       ("cases", lambda: case_outcomes(args.dry_run, config["device"])),
                       ("profile", lambda: profile(config, args.out)),
                       ("attention", lambda: attention(config, device))):
        begun = time.perf_counter()
        try:
            steps[name] = step()
        except Exception as error:  # noqa: BLE001 - a failed step is part of the report
            steps[name] = {"error": f"{type(error).__name__}: {error}"}
        seconds[name] = round(time.perf_counter() - begun, 1)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        print(f"{name} ({seconds[name]} s): {json.dumps(steps[name])}", flush=True)
    report = {"dry_run": args.dry_run, "torch": torch.__version__, "settings": config, "steps": steps,
              "step_seconds": seconds, "device_name": torch.cuda.get_device_name(0) if not args.dry_run else "cpu",
              "seconds": time.perf_counter() - started}
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    (args.out / "gpu_check.md").write_text(markdown(report))
    failed = [name for name, outcome in steps.items() if _failed(outcome)]
    print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'gpu_check.md'}; failed steps: {failed or 'none'}")
    sys.exit(1 if failed else 0)


def _failed(outcome: dict) -> bool:
    if "error" in outcome or outcome.get("exit", 0) != 0:
        return True
    return any(isinstance(part, dict) and _failed(part) for part in outcome.values())


if __name__ == "__main__":
    main()
