"""A checkpoint as a Hugging Face Llama directory (``hydraulis export``).

From a checkpoint folder ``step-NNNNNNNN`` (written from the optimizer layout, whatever strategy
trained it, :mod:`.store`) to a directory that ``transformers`` loads as ``LlamaForCausalLM``::

    config.json                                   (:func:`~.llama_mapping.hf_config`)
    model.safetensors                             when every weight fits one shard, else
    model-00001-of-0000n.safetensors …            shards of at most ``max_shard_bytes`` each
    model.safetensors.index.json                  {"metadata": {"total_size"}, "weight_map"}

(``save_pretrained``'s layout; a single weight larger than the limit gets a shard of its own).

**Streaming.** Parameters are cut, in canonical order, into consecutive shards of at most
``max_shard_bytes``; shard by shard, each of its parameters is assembled from the owners'
buffers (the checkpoint's shard files, memory-mapped: only the pages read are loaded), the shard
is written and freed. Peak memory is therefore about one output shard (plus one parameter in
fp32 when exporting to a narrower dtype), not the model. Worked example: Llama-2-7B in bf16 is
13.5 GB → shards of ≤ 5 GB: three files, ≈ 5 GB resident at most.

**Atomic.** Everything is written into ``OUT.partial`` and renamed to ``OUT`` at the end; an
``OUT`` that exists and is not empty is refused, so nothing is overwritten or half-written.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from hydraulis.artifacts.checkpoint import read_checkpoint_manifest
from hydraulis.base.errors import require
from hydraulis.base.files import fsync
from hydraulis.job.manifest import MANIFEST_FILE, CheckpointManifest
from hydraulis.runtime.checkpoint.hf_directory import CONFIG_FILE, INDEX_FILE, WEIGHTS_FILE
from hydraulis.runtime.checkpoint.llama_mapping import hf_config, hf_name
from hydraulis.runtime.checkpoint.store import load_shard
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.parameters import ParameterSpec
from hydraulis.sharding.ranges import Region, overlap

log = logging.getLogger(__name__)

MAX_SHARD_BYTES = 5 * 10**9
"""``save_pretrained``'s default ``max_shard_size`` ("5GB")."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PARTIAL = ".partial"


@dataclass(frozen=True)
class ExportSummary:
    """What was written: the directory, its weight files and the weights' bytes."""

    folder: Path
    files: tuple[str, ...]
    total_bytes: int


def export_checkpoint(checkpoint: str | Path, output: str | Path, dtype: str = "float32",
                      max_shard_bytes: int = MAX_SHARD_BYTES) -> ExportSummary:
    """Write the checkpoint folder ``checkpoint`` as the Hugging Face directory ``output`` in
    ``dtype`` (module docstring)."""
    require(dtype in DTYPES, "dtype", dtype, f"must be one of {', '.join(DTYPES)}")
    require(isinstance(max_shard_bytes, int) and max_shard_bytes > 0, "max_shard_bytes", max_shard_bytes,
            "must be a positive number of bytes")
    folder, manifest = _checkpoint(checkpoint)
    target = Path(output)
    require(not target.exists() or (target.is_dir() and not any(target.iterdir())), "output", str(target),
            "exists and is not an empty directory: give a new directory")
    placement = OptimizerOwnership(manifest.model, manifest.optimizer_layout, manifest.world_size)
    width = DTYPES[dtype].itemsize
    shards = list(_shards(placement.specs, width, max_shard_bytes))
    files = [WEIGHTS_FILE] if len(shards) == 1 else [f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
                                                     for k in range(len(shards))]
    partial = target.with_name(target.name + PARTIAL)
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        weight_map = _write_shards(folder, manifest, placement, shards, files, DTYPES[dtype], partial)
        total = sum(spec.numel for spec in placement.specs) * width
        _write_json(partial / CONFIG_FILE, hf_config(manifest.model, dtype))
        if len(files) > 1:
            _write_json(partial / INDEX_FILE, {"metadata": {"total_size": total}, "weight_map": weight_map})
        if target.exists():
            target.rmdir()
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return ExportSummary(target, tuple(files), total)


def _checkpoint(path: str | Path) -> tuple[Path, CheckpointManifest]:
    folder = Path(path)
    require((folder / MANIFEST_FILE).is_file(), "checkpoint", str(path),
            f"holds no {MANIFEST_FILE}: give a checkpoint folder step-NNNNNNNN")
    return folder, read_checkpoint_manifest(folder / MANIFEST_FILE)


def _shards(specs: tuple[ParameterSpec, ...], width: int, limit: int) -> Iterator[tuple[ParameterSpec, ...]]:
    """Consecutive parameters, at most ``limit`` bytes per group (a larger parameter alone)."""
    group: list[ParameterSpec] = []
    size = 0
    for spec in specs:
        if group and size + spec.numel * width > limit:
            yield tuple(group)
            group, size = [], 0
        group.append(spec)
        size += spec.numel * width
    if group:
        yield tuple(group)


def _write_shards(folder: Path, manifest: CheckpointManifest, placement: OptimizerOwnership,
                  shards: list[tuple[ParameterSpec, ...]], files: list[str], dtype: torch.dtype,
                  partial: Path) -> dict[str, str]:
    """Assemble and write each shard in turn; the index's ``weight_map``."""
    from safetensors.torch import save_file

    entries = {entry.rank: entry for entry in manifest.shards}
    buffers: dict[int, torch.Tensor] = {}

    def buffer(rank: int) -> torch.Tensor:
        if rank not in buffers:
            buffers[rank] = load_shard(folder, entries[rank])["master"]
        return buffers[rank]

    weight_map = {}
    for group, file in zip(tqdm(shards, desc="export", unit="shard", disable=None), files):
        tensors = {hf_name(spec.name, manifest.model): _assemble(placement, spec, buffer).to(dtype) for spec in group}
        save_file(tensors, str(partial / file), metadata={"format": "pt"})
        fsync(partial / file)
        weight_map.update(dict.fromkeys(tensors, file))
        log.info("wrote %s (%d tensors)", file, len(tensors))
    return weight_map


def _assemble(placement: OptimizerOwnership, spec: ParameterSpec, buffer) -> torch.Tensor:
    """The full fp32 tensor of ``spec`` from its owners' buffers (memory-mapped), block by block."""
    full = torch.empty(spec.numel, dtype=torch.float32)
    whole = Region.whole(spec)
    for rank, stored in placement.owner_regions(spec):
        for block in overlap(stored, whole):
            block.b_view(full).copy_(block.a_view(buffer(rank)))
    return full.view(spec.shape)


def _write_json(path: Path, document: dict) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")
    fsync(path)
