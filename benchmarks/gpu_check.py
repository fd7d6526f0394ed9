"""Every figure a first GPU should give us, in one command (≤ 20 minutes on one H100).

    .venv/bin/python benchmarks/gpu_check.py --out DIR            # on a CUDA machine
    .venv/bin/python benchmarks/gpu_check.py --dry-run --out DIR  # the same steps on the CPU, tiny

Steps, each recorded with its outcome (a failing step is reported, the others still run; a
step that crashes or whose command fails makes the exit status 1, a measured figure that misses
its prediction is a finding reported in its step):

1. **cuda tests**: ``pytest -m cuda`` (dry run: the CUDA test module, whose tests skip);
2. **throughput**: bf16 training of ``llama-1b`` (dry run: ``tiny`` in fp32) on one device with
   our runtime (``hydraulis train --strategy 1,1,1``, tokens/s from its summary) against
   ``transformers``' ``LlamaForCausalLM`` + ``torch.optim.AdamW(fused=True)`` on batches of the
   same tokens, documents packed into one row with positions restarting per document; MFU =
   ``6·P·tokens/s / peak`` (the device preset's peak), and their ratio;
3. **memory**: ``hydraulis memory``'s prediction of the one rank's total bytes, then the same
   training under ``--device-memory`` set to that prediction: the runtime's meter (CUDA: the
   allocator's peak, ``torch.cuda.max_memory_allocated``) fails the step if it measured more;
4. **profile**: ``hydraulis profile`` of scheme (1,1,1) and its fitted ``a, b, c``;
5. **attention kernels**: forward + backward of one packed micro-batch through
   :func:`~hydraulis.runtime.model.attention.packed_attention` with the device's fast kernel
   (CUDA: ``varlen``; CPU: ``cpu_flash``) and with ``math``.

``--out DIR`` receives ``gpu_check.json`` and ``gpu_check.md``. Never run in CI.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from hydraulis.presets import device_preset, model_preset
from hydraulis.runtime.model.attention import KernelKind, attention_kernel, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.types import MicroBatch

HYDRAULIS = [sys.executable, "-m", "hydraulis"]


def settings(dry_run: bool) -> dict:
    """The model, device preset, precision and sizes of the run."""
    if dry_run:
        return {"model": "tiny", "device": "cpu", "precision": "fp32", "seq_len": 64, "tokens": 256, "steps": 4,
                "cuda_tests": ["tests/runtime/test_cuda.py"], "profile_lens": "32,64"}
    return {"model": "llama-1b", "device": "h100-80g", "precision": "bf16", "seq_len": 4096, "tokens": 16384,
            "steps": 12, "cuda_tests": ["tests"], "profile_lens": "1024,2048,4096"}


def run(command: list[str], timeout: float) -> tuple[int, str]:
    """Exit status and combined output of ``command``."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def cuda_tests(config: dict) -> dict:
    code, out = run([sys.executable, "-m", "pytest", "-q", "-m", "cuda", *config["cuda_tests"]], 600)
    return {"exit": code, "result": out.strip().splitlines()[-1] if out.strip() else ""}


def ours(config: dict, extra: list[str]) -> tuple[int, str]:
    return run([*HYDRAULIS, "train", "--model", config["model"], "--strategy", "1,1,1", "--nproc", "1",
                "--steps", str(config["steps"]), "--token-budget", str(config["tokens"]), "--max-seq-len",
                str(config["seq_len"]), "--micro-batch-tokens", str(config["seq_len"]), "--precision", config["precision"], *extra], 900)


def throughput(config: dict, device: torch.device) -> dict:
    code, out = ours(config, [])
    match = re.search(r"([0-9.]+) tokens/s", out)
    mine = float(match.group(1)) if code == 0 and match else None
    theirs = baseline_tokens_per_s(config, device)
    params = model_preset(config["model"]).params
    peak = device_preset(config["device"]).peak_tflops * 1e12
    return {"exit": code, "ours_tokens_per_s": mine, "transformers_tokens_per_s": theirs,
            "ours_mfu": 6 * params * mine / peak if mine else None, "transformers_mfu": 6 * params * theirs / peak,
            "ratio": mine / theirs if mine else None}


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
    return tokens / statistics.median(times[1:])


def memory(config: dict) -> dict:
    code, out = run([*HYDRAULIS, "memory", "--model", config["model"], "--strategy", "1,1,1", "--devices", "1",
                     "--tokens", str(config["seq_len"]), "--device", config["device"], "--format", "json"], 300)
    if code != 0:
        return {"exit": code, "error": out.strip()[-500:]}
    predicted = max(rank["total_bytes"] for rank in json.loads(out)["ranks"])
    trained, log = ours(config, ["--device-memory", str(predicted)])
    return {"predicted_bytes": predicted, "measured_within_prediction": trained == 0,
            "meter": log.strip().splitlines()[-1] if trained else "peak ≤ prediction"}


def profile(config: dict, out_dir: Path) -> dict:
    space_file = out_dir / "profile_111.json"
    device = "cpu" if config["device"] == "cpu" else "cuda"
    code, out = run([*HYDRAULIS, "profile", "--model", config["model"], "--cp", "1", "--tp", "1", "--pp", "1",
                     "--seq-lens", config["profile_lens"], "--device", device, "--max-procs", "1",
                     "-o", str(space_file)], 900)
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
             f"torch {report['torch']}, model {report['settings']['model']}, {report['seconds']:.0f} s", ""]
    for name, outcome in report["steps"].items():
        lines += [f"## {name}", "", "```", json.dumps(outcome, indent=2), "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for gpu_check.json and gpu_check.md")
    parser.add_argument("--dry-run", action="store_true", help="run every step on the CPU with the tiny model")
    args = parser.parse_args()
    if not args.dry_run and not torch.cuda.is_available():
        parser.exit(2, "gpu_check: no CUDA device (use --dry-run on the CPU)\n")
    args.out.mkdir(parents=True, exist_ok=True)
    config = settings(args.dry_run)
    device = torch.device("cpu" if args.dry_run else "cuda")
    started = time.perf_counter()
    steps = {}
    for name, step in (("cuda_tests", lambda: cuda_tests(config)), ("throughput", lambda: throughput(config, device)),
                       ("memory", lambda: memory(config)), ("profile", lambda: profile(config, args.out)),
                       ("attention", lambda: attention(config, device))):
        try:
            steps[name] = step()
        except Exception as error:  # noqa: BLE001 - a failed step is part of the report
            steps[name] = {"error": f"{type(error).__name__}: {error}"}
        print(f"{name}: {json.dumps(steps[name])}", flush=True)
    report = {"dry_run": args.dry_run, "torch": torch.__version__, "settings": config, "steps": steps,
              "device_name": torch.cuda.get_device_name(0) if not args.dry_run else "cpu",
              "seconds": time.perf_counter() - started}
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    (args.out / "gpu_check.md").write_text(markdown(report))
    failed = [name for name, outcome in steps.items() if "error" in outcome or outcome.get("exit", 0) != 0]
    print(f"wrote {args.out / 'gpu_check.json'} and {args.out / 'gpu_check.md'}; failed steps: {failed or 'none'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
