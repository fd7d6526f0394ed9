"""What a checkpoint holds, as the manifest says it (no torch here: a manifest is read and
checked by the launching process before any rank starts).

A checkpoint is a folder ``step-00000003/`` (the number of completed steps) under a checkpoint
root, holding ``manifest.json`` (:mod:`hydraulis.artifacts.checkpoint`), one
``shard-RRRRR.pt`` per rank that owns part of the optimizer layout (``torch.save`` of its flat
fp32 buffers by name: ``master``, and ``exp_avg``, ``exp_avg_sq`` under Adam,
:mod:`hydraulis.runtime.optimizer.master`; read back with ``weights_only``: tensors only) and one
``rng-RRRRR.json`` per rank (its torch, numpy and Python random states as JSON: nothing in a
checkpoint is executable). The manifest lists every other file of the folder with its size and
SHA-256 (:class:`FileDigest`), so a flipped byte or a cut file is found before it is used.
:mod:`hydraulis.runtime.checkpoint.store` writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.base.errors import require, require_int
from hydraulis.base.types import ModelSpec, OptimizerLayout
from hydraulis.data.loader import LoaderConfig, LoaderPosition
from hydraulis.sharding.kinds import OptimizerKind

SHARD_FILE = "shard-{rank:05d}.pt"
RNG_FILE = "rng-{rank:05d}.json"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class ShardFile:
    """Rank ``rank``'s buffer: ``elements`` values per tensor, in ``file``."""

    rank: int
    file: str
    elements: int


@dataclass(frozen=True)
class FileDigest:
    """A file of the checkpoint folder: its name, its size in bytes and the SHA-256 of its bytes
    (64 hex digits)."""

    file: str
    bytes: int
    sha256: str

    def __post_init__(self) -> None:
        require(bool(self.file) and "/" not in self.file and self.file not in (".", ".."), "file", self.file,
                "must name a file inside the checkpoint folder")
        require_int(self.bytes, "bytes", minimum=0)
        require(len(self.sha256) == 64 and all(c in "0123456789abcdef" for c in self.sha256), "sha256",
                self.sha256, "must be 64 lower-case hex digits")


@dataclass(frozen=True)
class CheckpointManifest:
    """The state after ``step`` completed steps: the optimizer layout it was written from (on
    ``world_size`` ranks), the optimizer, its step count (updates applied: the learning-rate
    schedule's position) and the steps it skipped, the data and the loader position of the next
    batch, the shard files, and every file's size and checksum (``files``: empty for a
    checkpoint of schema 1, written before checksums, which is then read unverified)."""

    step: int
    model: ModelSpec
    optimizer_layout: OptimizerLayout
    world_size: int
    optimizer: OptimizerKind
    lr: float
    optimizer_steps: int
    data_fingerprint: str
    loader: LoaderConfig
    position: LoaderPosition
    shards: tuple[ShardFile, ...]
    created: str
    tool_version: str
    files: tuple[FileDigest, ...] = ()
    skipped_steps: int = 0

    def __post_init__(self) -> None:
        require_int(self.step, "step", minimum=0)
        require_int(self.world_size, "world_size", minimum=1)
        require_int(self.optimizer_steps, "optimizer.steps", minimum=0)
        require_int(self.skipped_steps, "optimizer.skipped", minimum=0)
        self.optimizer_layout.check(self.model, self.world_size)
        require(len(self.shards) == self.optimizer_layout.devices, "shards", len(self.shards),
                f"must list one file per rank of the optimizer layout ({self.optimizer_layout.devices})")
        require(sorted(s.rank for s in self.shards) == list(range(len(self.shards))), "shards",
                [s.rank for s in self.shards], "must list ranks 0, 1, … once each")
        names = [f.file for f in self.files]
        require(len(set(names)) == len(names), "files", names, "must list each file once")
        missing = sorted({s.file for s in self.shards} - set(names))
        require(not self.files or not missing, "files", missing, "are shard files without a checksum")

    @classmethod
    def name(cls, step: int) -> str:
        """The folder of the checkpoint after ``step`` steps."""
        return f"step-{step:08d}"
