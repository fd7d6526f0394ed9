"""Finding the checkpoint a job resumes from, and checking that the job can continue it (no
torch here: the launching process does this before any rank starts; the ranks then read their
parts with :func:`hydraulis.runtime.checkpoint.store.restore`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hydraulis.artifacts.checkpoint import read_checkpoint_manifest
from hydraulis.errors import require
from hydraulis.layout.kinds import OptimizerKind
from hydraulis.runtime.data import TrainingData
from hydraulis.job.manifest import MANIFEST_FILE, CheckpointManifest

_COMPLETE = re.compile(r"^step-\d{8}$")


@dataclass(frozen=True)
class Resume:
    """The checkpoint folder a job continues and its manifest."""

    folder: Path
    manifest: CheckpointManifest


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root`` (``step-NNNNNNNN`` with a manifest), or None;
    ``.partial`` folders of interrupted writes are never chosen."""
    root = Path(root)
    if not root.is_dir():
        return None
    complete = sorted(p for p in root.iterdir() if _COMPLETE.match(p.name) and (p / MANIFEST_FILE).is_file())
    return complete[-1] if complete else None


def find_checkpoint(path: str | Path) -> Resume:
    """``path`` (a checkpoint folder, or a root: its newest checkpoint) and its manifest."""
    path = Path(path)
    if not (path / MANIFEST_FILE).is_file():
        newest = latest_checkpoint(path)
        require(newest is not None, "resume", str(path), "holds no complete checkpoint (no step-*/manifest.json)")
        path = newest
    return Resume(path, read_checkpoint_manifest(path / MANIFEST_FILE))


def check_resumable(manifest: CheckpointManifest, model_name: str, optimizer: OptimizerKind, data: TrainingData) -> None:
    """Raise unless a job of this model, optimizer and data can continue the checkpoint
    (what may change: :mod:`hydraulis.runtime.checkpoint.store`). An initial checkpoint (step
    0, e.g. converted from Hugging Face) continues on any data: its loader position is the start."""
    require(manifest.model.name == model_name, "model", model_name,
            f"differs from the checkpoint's {manifest.model.name}")
    require(manifest.optimizer is optimizer, "optimizer", optimizer.value,
            f"differs from the checkpoint's {manifest.optimizer.value} (its moments would be missing or unused)")
    if manifest.step == 0:
        return
    require(manifest.data_fingerprint == data.fingerprint, "data", data.fingerprint,
            f"differs from the checkpoint's {manifest.data_fingerprint}")
    for field in ("token_budget", "max_seq_len", "seed", "shuffle"):
        ours, theirs = getattr(data.loader, field), getattr(manifest.loader, field)
        require(ours == theirs, field, ours,
                f"differs from the checkpoint's {theirs} (its loader position {manifest.position.epoch}:"
                f"{manifest.position.batch} would name other batches)")
