"""The runtime on CUDA GPUs (skipped without them): NCCL equivalence with heterogeneous pipelines,
context and sequence parallelism; the FlashAttention varlen path equal to the CPU path; the
allocator's peak of a training step against ``hydraulis memory``."""

import json
import subprocess
import sys

import pytest
import torch

from hydraulis.base.types import MicroBatch
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.runtime.model import attention
from hydraulis.runtime.model.attention import KernelKind, attention_kernel, packed_attention
from hydraulis.runtime.model.packing import pack_micro_batch
from hydraulis.runtime.parallel.context import load_balanced_indices
from hydraulis.runtime.parallel.group import ParallelGroup
from hydraulis.runtime.run import resolve_run
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind, Precision

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

BF16_TOLERANCE = 5e-2
"""check-equivalence's documented bf16 tolerance (:mod:`hydraulis.runtime.equivalence`)."""


def _gpus(count: int) -> None:
    if torch.cuda.device_count() < count:
        pytest.skip(f"needs {count} GPUs, {torch.cuda.device_count()} here")


@pytest.mark.parametrize("precision, tolerance", [(Precision.FP32, 1e-5), (Precision.BF16, BF16_TOLERANCE)])
def test_nccl_equivalence_with_heterogeneous_pipelines_context_and_sequence_parallelism(precision, tolerance):
    _gpus(4)
    from hydraulis.runtime.equivalence import check_equivalence

    options = RuntimeOptions(device=DeviceKind.CUDA, precision=precision, optimizer=OptimizerKind.ADAM, lr=1e-4)
    configs = [TrainConfig("tiny", specs, 3, token_budget=512, max_seq_len=256, runtime=options)
               for specs in (("1,2,1[sp]+2,1,1", "1,1,2+1,2,1[sp,recompute=full]"), ("2,2,1[sp]", "4,1,1"))]
    for result in check_equivalence([resolve_run(c) for c in configs], options, nproc=4):
        assert result.max_rel_diff <= tolerance, (result.strategies, result.worst_parameter, result.max_rel_diff)


@pytest.mark.parametrize("repeat_kv", [False, True], ids=["kernel's gqa", "kv heads repeated"])
@pytest.mark.parametrize("cp", [1, 2])
def test_the_varlen_kernel_equals_the_cpu_path(cp, repeat_kv, monkeypatch):
    cuda = torch.device("cuda")
    if attention_kernel(cuda, torch.bfloat16) is not KernelKind.VARLEN:
        pytest.skip("this torch has no varlen_attn with causal windows")
    kernel = attention._varlen_kernel()
    if not repeat_kv and not kernel.native_gqa:
        pytest.skip("this torch's varlen_attn has no enable_gqa (torch 2.11): the heads are repeated")
    if repeat_kv:
        monkeypatch.setattr(attention, "_varlen_kernel", lambda: attention.VarlenKernel(kernel.call, False))
    lengths = (700, 64, 300, 9)
    documents = [torch.arange(s + 1) for s in lengths]
    micro_batch = MicroBatch(tuple(range(len(lengths))), lengths)
    groups = [ParallelGroup(None, cp, r) if cp > 1 else ParallelGroup.single() for r in range(cp)]
    bounds = pack_micro_batch(documents, micro_batch, 1, groups[0], torch.device("cpu")).cu_seqlens.tolist()
    per_rank = [load_balanced_indices(bounds, cp, r) for r in range(cp)] if cp > 1 else [list(range(bounds[-1]))]
    gathered = torch.tensor([i for part in per_rank for i in part])
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(bounds[-1], heads, 64, generator=generator).to(torch.bfloat16) for heads in (8, 2, 2))
    for rank, group in enumerate(groups):
        mine = torch.tensor(per_rank[rank])
        outs, grads = [], []
        for device, kernel, dtype in ((cuda, KernelKind.VARLEN, torch.bfloat16),
                                      (torch.device("cpu"), KernelKind.CPU_FLASH, torch.float32)):
            plan = pack_micro_batch(documents, micro_batch, 1, group, device, kernel).attention
            inputs = [t.to(device, dtype).requires_grad_(True) for t in (q[mine], k[gathered], v[gathered])]
            out = packed_attention(*inputs, plan)
            out.float().pow(2).sum().backward()
            outs.append(out.float().cpu())
            grads.append([t.grad.float().cpu() for t in inputs])
        assert (outs[0] - outs[1]).norm() <= BF16_TOLERANCE * outs[1].norm()
        for ours, reference in zip(*grads):
            assert (ours - reference).norm() <= BF16_TOLERANCE * reference.norm()


def test_peak_memory_of_steady_steps_is_within_five_percent_of_hydraulis_memory():
    """Two steps (the second holds both cuBLAS workspaces and the fp32 main gradients from the
    first, as every later step does) against ``hydraulis memory`` at the longest step's tokens,
    the loss all at once and in chunks, K/V repeated where this torch's kernel needs it."""
    import inspect

    from torch.nn.attention.varlen import varlen_attn

    from hydraulis.runtime.launch import RankContext
    from hydraulis.runtime.trainer import train

    tokens = 4096
    device = "h200" if "H200" in torch.cuda.get_device_name(0) else "h100-80g"
    repeat = [] if "enable_gqa" in inspect.signature(varlen_attn).parameters else ["--repeat-kv"]
    for chunk in (0, 1024):
        options = RuntimeOptions(device=DeviceKind.CUDA, precision=Precision.BF16, loss_chunk_tokens=chunk)
        run = resolve_run(TrainConfig("tiny", ("1,1,1",), 2, token_budget=tokens, max_seq_len=tokens,
                                      micro_batch_tokens=tokens, runtime=options))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        result = train(RankContext.single(options), run, options)
        peak = torch.cuda.max_memory_allocated()
        longest = max(record.tokens for record in result.records)
        report = subprocess.run([sys.executable, "-m", "hydraulis", "memory", "--model", "tiny", "--strategy", "1,1,1",
                                 "--devices", "1", "--tokens", str(longest), "--device", device,
                                 "--loss-chunk-tokens", str(chunk), *repeat, "--format", "json"],
                                capture_output=True, text=True, check=True)
        predicted = json.loads(report.stdout)["ranks"][0]["total_bytes"]
        assert abs(peak - predicted) <= 0.05 * predicted, (chunk, peak, predicted)


def test_checkpoints_commit_verified_files_under_nccl_and_resume_by_themselves(tmp_path):
    """The commit protocol on NCCL (its gloo group is host-synchronised): every file listed with a
    checksum that verifies, and a second job continues from the newest checkpoint by itself."""
    _gpus(1)
    from hydraulis.runtime.checkpoint.resume import find_checkpoint
    from hydraulis.runtime.trainer import run_training

    gpus = min(torch.cuda.device_count(), 2)
    options = RuntimeOptions(device=DeviceKind.CUDA, precision=Precision.FP32)

    def train(steps):
        config = TrainConfig("tiny", ("1,1,2" if gpus == 2 else "1,1,1",), steps, token_budget=192, nproc=gpus,
                             checkpoint_dir=str(tmp_path), checkpoint_every=2, runtime=options)
        return run_training(resolve_run(config), options, gpus)

    assert [r.step for r in train(4)] == [0, 1, 2, 3]
    committed = find_checkpoint(tmp_path)
    assert committed.manifest.step == 4 and len(committed.manifest.files) == 2 * gpus
    assert [r.step for r in train(6)] == [4, 5]
