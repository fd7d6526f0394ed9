"""Checkpoints written from the optimizer layout, independent of the compute strategy.

**Format** (:mod:`hydraulis.job.manifest`): a folder per checkpoint, ``step-00000003/``
under the checkpoint root, with the manifest, one shard file per owner of the optimizer layout
(its flat fp32 buffers: master weights and moments), one random-state file per rank (JSON) and
every file's size and SHA-256 in the manifest. The compute layout appears nowhere: weights of
the compute shards are copies that the next step propagates from the buffers anyway.

The details: :func:`commit`."""

from __future__ import annotations

import logging
import pickle
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from hydraulis import __version__
from hydraulis.artifacts import timestamp
from hydraulis.artifacts.checkpoint import write_checkpoint_manifest
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.files import file_digest, fsync, fsync_folder, write_text_atomically
from hydraulis.data.loader import LoaderPosition
from hydraulis.job.manifest import (
    MANIFEST_FILE,
    RNG_FILE,
    SHARD_FILE,
    CheckpointManifest,
    FileDigest,
    ShardFile,
)
from hydraulis.runtime.checkpoint.random_state import (
    encode_states,
    random_states,
    read_random_states,
    set_random_states,
)
from hydraulis.runtime.checkpoint.resume import file_problem
from hydraulis.runtime.data import TrainingData
from hydraulis.runtime.optimizer.master import OptimizerShard, assemble_canonical
from hydraulis.sharding.ownership import OptimizerOwnership
from hydraulis.sharding.ranges import overlap

log = logging.getLogger(__name__)

PARTIAL = ".partial"
_STEP_FOLDER = re.compile(r"^step-\d{8}(\.partial)?$")


@dataclass(frozen=True)
class Snapshot:
    """One rank's part of the checkpoint after ``step`` steps, copied out of the training state:
    its buffers by name (None on a rank that owns no part of the optimizer layout), its random
    states, and the manifest without its ``files`` (the same on every rank)."""

    step: int
    rank: int
    tensors: dict[str, torch.Tensor] | None
    states: dict
    manifest: CheckpointManifest


def take_snapshot(step: int, shard: OptimizerShard, data: TrainingData, position: LoaderPosition, rank: int,
                  world_size: int, host: dict[str, torch.Tensor] | None = None) -> Snapshot:
    """This rank's state after ``step`` steps, its buffers copied into ``host`` (CPU tensors of
    the buffers' sizes, reused from one checkpoint to the next) or into new CPU tensors."""
    tensors = None
    if shard.placement.place(rank) is not None:
        tensors = {name: (host[name] if host else torch.empty(t.shape, dtype=t.dtype)).copy_(t)
                   for name, t in shard.tensors.items()}
    return Snapshot(step, rank, tensors, random_states(), _manifest(step, shard, data, position, world_size))


def partial_folder(root: str | Path, step: int) -> Path:
    """Where the checkpoint after ``step`` steps is written before its commit."""
    return Path(root) / (CheckpointManifest.name(step) + PARTIAL)


def write_rank_files(root: str | Path, snapshot: Snapshot) -> tuple[FileDigest, ...]:
    """Write this rank's files into the step's ``.partial`` folder, flushed to disk; their digests."""
    partial = partial_folder(root, snapshot.step)
    partial.mkdir(parents=True, exist_ok=True)
    written = []
    if snapshot.tensors is not None:
        written.append(partial / SHARD_FILE.format(rank=snapshot.rank))
        write_shard(written[-1], snapshot.tensors)
    written.append(partial / RNG_FILE.format(rank=snapshot.rank))
    write_text_atomically(written[-1], encode_states(snapshot.states))
    return tuple(FileDigest(path.name, *file_digest(path)) for path in written)


def write_shard(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """One owner's flat buffers by name, flushed to disk."""
    torch.save(tensors, path)
    fsync(path)


def commit(root: str | Path, manifest: CheckpointManifest, digests: tuple[FileDigest, ...], keep: int) -> Path:
    """Rank 0, once every rank's files are written: check each listed file's size and checksum,
    write the manifest, rename the folder into place, keep the newest ``keep`` checkpoints; the
    committed folder.

    **Commit protocol** (every backend; :mod:`hydraulis.runtime.checkpoint.writer` runs it in the
    background): every rank writes its files into ``step-00000003.partial/`` (creating the folder
    itself if it is first, so no file is written before its folder exists), fsyncs them and hashes
    them (:func:`write_rank_files`); the digests travel to rank 0 over a host-synchronised gloo
    group (a gather no rank passes before every rank has sent); rank 0 then checks every listed
    file's size and checksum on disk, writes the manifest (atomically) and renames the folder to
    ``step-00000003`` — one ``rename``, atomic on a POSIX file system (the root must be one file
    system that every rank sees, e.g. a shared mount for many nodes) — and removes all but the newest
    ``keep`` checkpoints (:func:`commit`). A job that dies while writing leaves a ``.partial`` folder
    that is never read; resuming verifies every file against the manifest and falls back to the
    previous complete checkpoint when one does not match (:mod:`hydraulis.runtime.checkpoint.resume`).

    **Resuming** (:func:`restore`): each rank of the new job takes, for every element of its new
    buffer, the value at that element's old owner and position — block by block, where its new
    regions overlap the old owners' (:meth:`~hydraulis.sharding.ownership.OptimizerOwnership.owner_regions`,
    :func:`~hydraulis.sharding.ranges.overlap`) — reading only the shard files it needs
    (memory-mapped, ``weights_only``: a file that holds anything but tensors is refused). So the
    new job may run another proposal, other
    strategies, another batching method or planner, another number of processes — and even
    another optimizer layout, at the price that a rank then reads parts of several shard files.
    What must stay: the model, the optimizer kind (the moments must exist), the data (corpus and
    tokenizer, or synthetic lengths) and the loader's token budget, maximum length and seed — the
    loader position means nothing on other batches. The learning rate may change. Ranks restore
    the random states of the old rank with their number, when there was one (training draws no
    random numbers after initialisation — no dropout, data order and dispatch ties come from
    seeds — so this only matters to code that adds randomness).
    """
    partial = partial_folder(root, manifest.step)
    for digest in digests:
        found = file_problem(partial, digest)
        require(found is None, "checkpoint", str(partial / digest.file), f"{found}: not committed")
    write_checkpoint_manifest(partial / MANIFEST_FILE, replace(manifest, files=tuple(sorted(digests,
                                                                                            key=lambda d: d.file))))
    final = Path(root) / CheckpointManifest.name(manifest.step)
    _replace(partial, final)
    prune(root, keep)
    return final


def prune(root: str | Path, keep: int) -> None:
    """Remove all but the newest ``keep`` complete checkpoints under ``root``."""
    complete = sorted(p for p in Path(root).iterdir() if _STEP_FOLDER.match(p.name) and not p.name.endswith(PARTIAL)
                      and (p / MANIFEST_FILE).is_file())
    for old in complete[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
        log.info("removed old checkpoint %s (keeping the newest %d)", old, keep)


def clear_partial(root: str | Path, everything: bool = False) -> None:
    """Remove the ``.partial`` folders of interrupted writes under ``root`` (``everything``:
    every checkpoint folder — a fresh job told to overwrite)."""
    root = Path(root)
    if not root.is_dir():
        return
    for folder in root.iterdir():
        if _STEP_FOLDER.match(folder.name) and (everything or folder.name.endswith(PARTIAL)):
            shutil.rmtree(folder, ignore_errors=True)


def restore(folder: str | Path, manifest: CheckpointManifest, shard: OptimizerShard, rank: int) -> None:
    """Fill this rank's buffer from the checkpoint (:func:`commit`) and restore its random states."""
    folder = Path(folder)
    old = OptimizerOwnership(manifest.model, manifest.optimizer_layout, manifest.world_size)
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
    shard.load(values, manifest.optimizer_steps, manifest.skipped_steps)
    states = folder / RNG_FILE.format(rank=rank)
    if states.is_file():
        set_random_states(read_random_states(states))


def read_canonical(folder: str | Path, manifest: CheckpointManifest) -> dict[str, dict[str, torch.Tensor]]:
    """Every tensor of a checkpoint (``master``, and the moments under Adam) in canonical form:
    ``{"master": {parameter name: full tensor}, …}`` on the CPU — for checks and exports of
    small models (it reads the whole checkpoint)."""
    folder = Path(folder)
    placement = OptimizerOwnership(manifest.model, manifest.optimizer_layout, manifest.world_size)
    shards = {entry.rank: load_shard(folder, entry) for entry in manifest.shards}
    names = next(iter(shards.values())).keys()
    return {name: assemble_canonical(placement, lambda rank: shards[rank][name]) for name in names}


def _manifest(step: int, shard: OptimizerShard, data: TrainingData, position: LoaderPosition,
              world_size: int) -> CheckpointManifest:
    placement = shard.placement
    shards = tuple(ShardFile(r, SHARD_FILE.format(rank=r), placement.buffer_size(r)) for r in range(placement.owners))
    return CheckpointManifest(step, placement.model, placement.layout, world_size, shard.options.optimizer,
                              shard.options.lr, shard.steps, data.fingerprint, data.loader, position, shards,
                              timestamp(), __version__, skipped_steps=shard.skipped)


def load_shard(folder: Path, entry: ShardFile) -> dict[str, torch.Tensor]:
    """One owner's flat buffers by name, memory-mapped (only the pages read are loaded); a file
    that holds anything but tensors (a pickle that would run code) is refused."""
    path = folder / entry.file
    try:
        tensors = torch.load(path, map_location="cpu", mmap=True, weights_only=True)
    except FileNotFoundError:
        raise HydraulisError("checkpoint", str(path), "is missing: the checkpoint is incomplete") from None
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError) as error:
        raise HydraulisError("checkpoint", str(path), f"is refused: {_refusal(error)}") from None
    except OSError as error:
        raise HydraulisError("checkpoint", str(path), f"cannot be read ({error.strerror or error})") from None
    require(isinstance(tensors, dict) and all(isinstance(t, torch.Tensor) for t in tensors.values()), "checkpoint",
            str(path), "is refused: not a dictionary of tensors")
    for name, tensor in tensors.items():
        require(tensor.numel() == entry.elements, f"checkpoint: {entry.file}.{name}", tensor.numel(),
                f"elements, the manifest says {entry.elements}")
    return tensors


def _refusal(error: Exception) -> str:
    """Why torch refused a shard, in our words: torch's own message advises loading the file with
    ``weights_only=False``, which would run whatever code an untrusted file holds."""
    if isinstance(error, pickle.UnpicklingError) or "weights_only" in str(error):
        return ("it holds objects other than tensors (a pickle that could run code), so it is not loaded; "
                "a checkpoint Hydraulis wrote holds tensors only")
    if isinstance(error, EOFError) or "zip" in str(error).lower() or "archive" in str(error).lower():
        return "it is not a complete torch tensor file (truncated, or another format)"
    return f"it is not a file of plain tensors ({type(error).__name__})"


def _replace(partial: Path, final: Path) -> None:
    """Rename ``partial`` to ``final`` (an older checkpoint of the same step is replaced)."""
    replaced = final.with_name(final.name + ".replaced")
    if final.exists():
        shutil.rmtree(replaced, ignore_errors=True)
        final.rename(replaced)
    partial.rename(final)
    fsync_folder(final.parent)
    shutil.rmtree(replaced, ignore_errors=True)
