"""Checkpoints written from the optimizer layout, independent of the compute strategy.

**Format** (:mod:`hydraulis.job.manifest`): a folder per checkpoint, ``step-00000003/``
under the checkpoint root, with the manifest, one shard file per owner of the optimizer layout
(its flat fp32 buffers: master weights and moments) and one random-state file per rank. The
compute layout appears nowhere: weights of the compute shards are copies that the next step
propagates from the buffers anyway.

**Atomic**: every rank writes into ``step-00000003.partial/``; after a barrier (every rank's
files are written and flushed to disk), rank 0 writes the manifest and renames the folder to
``step-00000003`` — one ``rename``, atomic on a POSIX file system (the root must be one file
system that every rank sees, e.g. a shared mount for many nodes). A job that dies while writing
leaves a ``.partial`` folder that is never read; :func:`~hydraulis.runtime.checkpoint.resume.latest_checkpoint` only sees folders
with a manifest, so the last complete checkpoint stays the one a new job resumes from
(:mod:`hydraulis.runtime.checkpoint.resume`).

**Resuming** (:func:`restore`): each rank of the new job takes, for every element of its new
buffer, the value at that element's old owner and position — block by block, where its new
regions overlap the old owners' (:meth:`~hydraulis.layout.optimizer_placement.OptimizerPlacement.owner_regions`,
:func:`~hydraulis.layout.ranges.overlap`) — reading only the shard files it needs
(memory-mapped). So the new job may run another proposal, other
strategies, another batching method or planner, another number of processes — and even
another optimizer layout, at the price that a rank then reads parts of several shard files.
What must stay: the model, the optimizer kind (the moments must exist), the data (corpus and
tokenizer, or synthetic lengths) and the loader's token budget, maximum length and seed — the
loader position means nothing on other batches. The learning rate may change. Ranks restore
the random states of the old rank with their number, when there was one (training draws no
random numbers after initialisation — no dropout, data order and dispatch ties come from
seeds — so this only matters to code that adds randomness).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.checkpoint import write_checkpoint_manifest
from hydraulis.data.loader import LoaderPosition
from hydraulis.errors import HydraulisError, require
from hydraulis.runtime.data import TrainingData
from hydraulis.runtime.launch import RankContext
from hydraulis.job.manifest import MANIFEST_FILE, RNG_FILE, SHARD_FILE, CheckpointManifest, ShardFile
from hydraulis.runtime.optimizer.master import OptimizerShard, assemble_canonical
from hydraulis.layout.optimizer_placement import OptimizerPlacement
from hydraulis.layout.ranges import overlap

PARTIAL = ".partial"


def save_checkpoint(root: str | Path, step: int, shard: OptimizerShard, data: TrainingData,
                    position: LoaderPosition, context: RankContext) -> Path:
    """Write the checkpoint after ``step`` completed steps (every rank calls this); its folder."""
    root = Path(root)
    final = root / CheckpointManifest.name(step)
    partial = final.with_name(final.name + PARTIAL)
    if context.rank == 0:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    _barrier(context)
    if shard.placement.place(context.rank) is not None:
        write_shard(partial / SHARD_FILE.format(rank=context.rank), shard)
    _save(partial / RNG_FILE.format(rank=context.rank), random_states())
    _barrier(context)
    if context.rank == 0:
        write_checkpoint_manifest(partial / MANIFEST_FILE, _manifest(step, shard, data, position, context))
        fsync(partial / MANIFEST_FILE)
        _replace(partial, final)
    return final


def write_shard(path: Path, shard: OptimizerShard) -> None:
    """One owner's flat buffers by name, flushed to disk."""
    _save(path, {name: tensor.cpu() for name, tensor in shard.tensors.items()})


def restore(folder: str | Path, manifest: CheckpointManifest, shard: OptimizerShard, rank: int) -> None:
    """Fill this rank's buffer from the checkpoint (module docstring) and restore its random states."""
    folder = Path(folder)
    old = OptimizerPlacement(manifest.model, manifest.optimizer_layout, manifest.world_size)
    files = {s.rank: s for s in manifest.shards}
    loaded: dict[int, dict[str, torch.Tensor]] = {}
    values = {name: torch.empty_like(tensor, device="cpu") for name, tensor in shard.tensors.items()}
    for region in shard.regions:
        for source, stored in old.owner_regions(region.spec):
            blocks = overlap(stored, region)
            if blocks and source not in loaded:
                loaded[source] = load_shard(folder, files[source])
            for name, value in values.items():
                for block in blocks:
                    block.b_view(value).copy_(block.a_view(loaded[source][name]))
    shard.load(values, manifest.optimizer_steps)
    states = folder / RNG_FILE.format(rank=rank)
    if states.is_file():
        set_random_states(torch.load(states, weights_only=False))


def read_canonical(folder: str | Path, manifest: CheckpointManifest) -> dict[str, dict[str, torch.Tensor]]:
    """Every tensor of a checkpoint (``master``, and the moments under Adam) in canonical form:
    ``{"master": {parameter name: full tensor}, …}`` on the CPU — for checks and exports of
    small models (it reads the whole checkpoint)."""
    folder = Path(folder)
    placement = OptimizerPlacement(manifest.model, manifest.optimizer_layout, manifest.world_size)
    shards = {entry.rank: load_shard(folder, entry) for entry in manifest.shards}
    names = next(iter(shards.values())).keys()
    return {name: assemble_canonical(placement, lambda rank: shards[rank][name]) for name in names}


def random_states() -> dict:
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_random_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(states["cuda"])


def _manifest(step: int, shard: OptimizerShard, data: TrainingData, position: LoaderPosition,
              context: RankContext) -> CheckpointManifest:
    placement = shard.placement
    shards = tuple(ShardFile(r, SHARD_FILE.format(rank=r), placement.buffer_size(r)) for r in range(placement.owners))
    return CheckpointManifest(step, placement.model, placement.layout, context.world_size, shard.options.optimizer,
                              shard.options.lr, shard.steps, data.fingerprint, data.loader, position, shards,
                              timestamp(), __version__)


def load_shard(folder: Path, entry: ShardFile) -> dict[str, torch.Tensor]:
    """One owner's flat buffers by name, memory-mapped (only the pages read are loaded)."""
    path = folder / entry.file
    try:
        tensors = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except FileNotFoundError:
        raise HydraulisError("checkpoint", str(path), "is missing: the checkpoint is incomplete") from None
    for name, tensor in tensors.items():
        require(tensor.numel() == entry.elements, f"checkpoint: {entry.file}.{name}", tensor.numel(),
                f"elements, the manifest says {entry.elements}")
    return tensors


def _save(path: Path, value: object) -> None:
    torch.save(value, path)
    fsync(path)


def fsync(path: Path) -> None:
    """Flush ``path``'s data to disk."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _replace(partial: Path, final: Path) -> None:
    """Rename ``partial`` to ``final`` (an older checkpoint of the same step is replaced)."""
    replaced = final.with_name(final.name + ".replaced")
    if final.exists():
        shutil.rmtree(replaced, ignore_errors=True)
        final.rename(replaced)
    partial.rename(final)
    directory = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    shutil.rmtree(replaced, ignore_errors=True)


def _barrier(context: RankContext) -> None:
    context.world.all_reduce(torch.ones(1, device=context.device))
