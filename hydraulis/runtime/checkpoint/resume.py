"""Finding the checkpoint a job resumes from, and checking that the job can continue it (no
torch here: the launching process does this before any rank starts; the ranks then read their
parts with :func:`hydraulis.runtime.checkpoint.store.restore`).

**Verified before use**: every file the manifest lists is checked for its size and SHA-256
(:func:`verify_checkpoint`). Under a root, the newest complete checkpoint that passes is chosen:
one that fails is skipped with a warning naming the file and what is wrong with it, and the
previous one is tried (the job keeps ``--keep-checkpoints`` of them, default 2, for this). When
none passes, the error names the root and the newest checkpoint's failing file. A folder named
directly must pass itself.

Worked example: ``step-00000004/shard-00001.pt`` with 16 flipped bytes →
``checkpoint step-00000004 skipped: shard-00001.pt has SHA-256 3b1f…, the manifest says 9e0a…
(corrupted)``, and the job resumes from ``step-00000002``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from hydraulis.artifacts.checkpoint import read_checkpoint_manifest
from hydraulis.base.errors import HydraulisError, require
from hydraulis.base.files import file_digest
from hydraulis.job.manifest import MANIFEST_FILE, CheckpointManifest, FileDigest
from hydraulis.runtime.data import TrainingData
from hydraulis.sharding.kinds import OptimizerKind

log = logging.getLogger(__name__)
_COMPLETE = re.compile(r"^step-\d{8}$")


@dataclass(frozen=True)
class Resume:
    """The checkpoint folder a job continues and its manifest."""

    folder: Path
    manifest: CheckpointManifest


def complete_checkpoints(root: str | Path) -> list[Path]:
    """The complete checkpoints under ``root`` (``step-NNNNNNNN`` with a manifest), newest first;
    ``.partial`` folders of interrupted writes are never among them."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if _COMPLETE.match(p.name) and (p / MANIFEST_FILE).is_file()),
                  reverse=True)


def latest_checkpoint(root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``root``, or None."""
    complete = complete_checkpoints(root)
    return complete[0] if complete else None


def find_checkpoint(path: str | Path) -> Resume:
    """``path`` (a checkpoint folder, or a root: its newest checkpoint whose files all pass
    :func:`verify_checkpoint`, skipping and naming those that do not) and its manifest."""
    path = Path(path)
    if (path / MANIFEST_FILE).is_file():
        return verified(path)
    candidates = complete_checkpoints(path)
    require(bool(candidates), "resume", str(path), "holds no complete checkpoint (no step-*/manifest.json)")
    first_error = None
    for folder in candidates:
        try:
            return verified(folder)
        except HydraulisError as error:
            first_error = first_error or error
            log.warning("checkpoint %s skipped: %s", folder.name, error.problem)
    raise HydraulisError("resume", str(path), f"holds no usable checkpoint; the newest: {first_error}")


def verified(folder: Path) -> Resume:
    """``folder``'s manifest, once every file it lists passed :func:`verify_checkpoint`."""
    try:
        manifest = read_checkpoint_manifest(folder / MANIFEST_FILE)
    except HydraulisError as error:  # named by its file, as the checkpoint's other files are
        problem = error.problem if error.field == "path" else str(error)
        raise HydraulisError("checkpoint", str(folder), f"{MANIFEST_FILE} {problem}") from None
    problem = verify_checkpoint(folder, manifest)
    require(problem is None, "checkpoint", str(folder), str(problem))
    if not manifest.files:
        log.warning("checkpoint %s has no checksums (schema 1): its files are not verified", folder)
    return Resume(folder, manifest)


def verify_checkpoint(folder: Path, manifest: CheckpointManifest) -> str | None:
    """What is wrong with the first file of ``folder`` that does not match its manifest entry
    (missing, another size, another SHA-256), or None when every listed file matches."""
    for digest in manifest.files:
        problem = file_problem(folder, digest)
        if problem is not None:
            return f"{digest.file} {problem}"
    return None


def file_problem(folder: Path, digest: FileDigest) -> str | None:
    """What is wrong with ``digest.file`` in ``folder`` (missing, size, checksum), or None."""
    path = folder / digest.file
    if not path.is_file():
        return "is missing"
    size, sha256 = file_digest(path)
    if size != digest.bytes:
        return f"holds {size} bytes, the manifest says {digest.bytes} (truncated or overwritten)"
    if sha256 != digest.sha256:
        return f"has SHA-256 {sha256[:16]}…, the manifest says {digest.sha256[:16]}… (corrupted)"
    return None


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
