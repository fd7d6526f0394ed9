"""What a checkpoint holds, as the manifest says it (no torch here: a manifest is read and
checked by the launching process before any rank starts).

A checkpoint is a folder ``step-00000003/`` (the number of completed steps) under a checkpoint
root, holding ``manifest.json`` (:mod:`hydraulis.artifacts.checkpoint`), one
``shard-RRRRR.pt`` per rank that owns part of the optimizer layout (``torch.save`` of its flat
fp32 buffers by name: ``master``, and ``exp_avg``, ``exp_avg_sq`` under Adam,
:mod:`hydraulis.runtime.optimizer.master`) and one ``rng-RRRRR.pt`` per rank (its torch, numpy and Python
random states). :mod:`hydraulis.runtime.checkpoint.store` writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydraulis.data.loader import LoaderConfig, LoaderPosition
from hydraulis.errors import require, require_int
from hydraulis.layout.kinds import OptimizerKind
from hydraulis.types import ModelSpec, OptimizerLayout

SHARD_FILE = "shard-{rank:05d}.pt"
RNG_FILE = "rng-{rank:05d}.pt"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class ShardFile:
    """Rank ``rank``'s buffer: ``elements`` values per tensor, in ``file``."""

    rank: int
    file: str
    elements: int


@dataclass(frozen=True)
class CheckpointManifest:
    """The state after ``step`` completed steps: the optimizer layout it was written from (on
    ``world_size`` ranks), the optimizer and its step count, the data and the loader position
    of the next batch, and the shard files."""

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

    def __post_init__(self) -> None:
        require_int(self.step, "step", minimum=0)
        require_int(self.world_size, "world_size", minimum=1)
        require_int(self.optimizer_steps, "optimizer.steps", minimum=0)
        self.optimizer_layout.check(self.model, self.world_size)
        require(len(self.shards) == self.optimizer_layout.devices, "shards", len(self.shards),
                f"must list one file per rank of the optimizer layout ({self.optimizer_layout.devices})")
        require(sorted(s.rank for s in self.shards) == list(range(len(self.shards))), "shards",
                [s.rank for s in self.shards], "must list ranks 0, 1, … once each")

    @classmethod
    def name(cls, step: int) -> str:
        """The folder of the checkpoint after ``step`` steps."""
        return f"step-{step:08d}"
