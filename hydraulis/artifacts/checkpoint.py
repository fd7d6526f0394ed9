"""The checkpoint manifest artifact (``manifest.json`` inside a checkpoint folder).

Layout (``schema_version`` 2; version 1, without ``files``, is read too and its files are
then not verified)::

    {"schema_version": 2, "kind": "checkpoint", "step": 3,
     "model": {"name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"},
     "optimizer_layout": {"dp", "tp", "pp"}, "world_size": 4,
     "optimizer": {"kind": "adamw", "lr": 0.001, "steps": 3, "skipped": 0},
     "data": {"fingerprint", "token_budget", "max_seq_len", "seed", "shuffle"},
     "position": {"epoch", "batch"},
     "shards": [{"rank": 0, "file": "shard-00000.pt", "elements": 78976}, ...],
     "files": [{"file": "shard-00000.pt", "bytes": 949121, "sha256": "9f86d0…"}, ...],
     "created", "tool_version"}

``optimizer.steps`` counts the updates applied (the learning-rate schedule's position,
:mod:`hydraulis.job.schedule`), ``optimizer.skipped`` the steps skipped for a non-finite gradient
norm (optional: absent, 0). The folder's other files are described in :mod:`hydraulis.job.manifest`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.artifacts.scheme_space import model_from_record, model_to_dict
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import OptimizerLayout
from hydraulis.data.loader import LoaderConfig, LoaderPosition
from hydraulis.job.manifest import CheckpointManifest, FileDigest, ShardFile
from hydraulis.sharding.kinds import OptimizerKind

KIND = "checkpoint"
SCHEMA_VERSION = 2


def checkpoint_manifest_to_dict(manifest: CheckpointManifest) -> dict:
    loader = manifest.loader
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "step": manifest.step,
        "model": model_to_dict(manifest.model),
        "optimizer_layout": asdict(manifest.optimizer_layout),
        "world_size": manifest.world_size,
        "optimizer": {"kind": manifest.optimizer.value, "lr": manifest.lr, "steps": manifest.optimizer_steps,
                      "skipped": manifest.skipped_steps},
        "data": {"fingerprint": manifest.data_fingerprint, "token_budget": loader.token_budget,
                 "max_seq_len": loader.max_seq_len, "seed": loader.seed, "shuffle": loader.shuffle},
        "position": asdict(manifest.position),
        "shards": [asdict(shard) for shard in manifest.shards],
        "files": [asdict(digest) for digest in manifest.files],
        "created": manifest.created,
        "tool_version": manifest.tool_version,
    }


def checkpoint_manifest_from_dict(document: object) -> CheckpointManifest:
    record = Record(document)
    check_header(record, KIND, (1, SCHEMA_VERSION))
    layout, optimizer, data, position = (record.sub(k) for k in ("optimizer_layout", "optimizer", "data", "position"))
    kind = optimizer.str("kind")
    try:
        optimizer_kind = OptimizerKind(kind)
    except ValueError:
        raise HydraulisError("optimizer.kind", kind, f"must be one of {[o.value for o in OptimizerKind]}") from None
    shuffle = data.raw("shuffle", True)
    if not isinstance(shuffle, bool):
        raise HydraulisError("data.shuffle", shuffle, "must be true or false")
    return build("", CheckpointManifest,
        step=record.int("step"),
        model=model_from_record(record.sub("model")),
        optimizer_layout=build("optimizer_layout", OptimizerLayout, dp=layout.int("dp"), tp=layout.int("tp"),
                               pp=layout.int("pp")),
        world_size=record.int("world_size"),
        optimizer=optimizer_kind,
        lr=optimizer.float("lr"),
        optimizer_steps=optimizer.int("steps"),
        data_fingerprint=data.str("fingerprint"),
        loader=build("data", LoaderConfig, token_budget=data.int("token_budget"), max_seq_len=data.int("max_seq_len"),
                     seed=data.int("seed"), shuffle=shuffle),
        position=build("position", LoaderPosition, epoch=position.int("epoch"), batch=position.int("batch")),
        shards=tuple(build(r.path, ShardFile, rank=r.int("rank"), file=r.str("file"), elements=r.int("elements"))
                     for r in record.records("shards")),
        created=record.str("created", ""),
        tool_version=record.str("tool_version", ""),
        files=tuple(build(r.path, FileDigest, file=r.str("file"), bytes=r.int("bytes"), sha256=r.str("sha256"))
                    for r in (record.records("files") if "files" in record.data else ())),
        skipped_steps=optimizer.int("skipped", 0),
    )


def read_checkpoint_manifest(path: str | Path) -> CheckpointManifest:
    return checkpoint_manifest_from_dict(read_json(path))


def write_checkpoint_manifest(path: str | Path, manifest: CheckpointManifest) -> None:
    write_json(path, checkpoint_manifest_to_dict(manifest))
