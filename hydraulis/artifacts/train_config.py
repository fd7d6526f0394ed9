"""The training-config artifact: what ``hydraulis train --config`` reads and writes back resolved.

The layout of each version is in :func:`train_config_from_dict`.

Every field is derived from the job's option tree (:mod:`hydraulis.job.options`): the
``TrainConfig`` options at the top, the ``RuntimeOptions`` ones under ``runtime``, each under
its field's name; a field missing from the file takes its default, so older versions read.
``hydraulis train --config`` also reads a TOML job file (:mod:`.job_file`).
"""

from __future__ import annotations

import math
from dataclasses import MISSING
from enum import Enum
from pathlib import Path

from hydraulis.artifacts.record import (
    Record,
    build,
    check_header,
    read_json,
    write_json,
)
from hydraulis.base.types import OptimizerLayout
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.options import Kind, Leaf, job_options, nested_values

KIND = "train_config"
SCHEMA_VERSION = 4


def train_config_to_dict(config: TrainConfig) -> dict:
    values = {leaf.path: _encoded(leaf, _value_at(config, leaf.path)) for leaf in job_options(TrainConfig)}
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, **nested_values(values)}


def train_config_from_dict(document: object) -> TrainConfig:
    """The configuration a record of any version that this module reads holds.

    Layout (``schema_version`` 4; every field but ``steps`` and one of ``strategies`` and
    ``proposal_file`` optional — ``model`` too when ``init_from`` or ``resume`` gives the model;
    version 3, without the runtime's optimizer recipe from ``betas`` on (read with its defaults),
    version 2, without ``init_from``, and version 1, without the fields from ``proposal_file`` on,
    are read too; ``cluster_file``, ``keep_checkpoints``, ``fresh`` and ``overwrite``, added later,
    are optional in every version)::

        {"schema_version": 4, "kind": "train_config", "model": "tiny",
         "strategies": ["1,2,1+1,1,2", "1,1,2x2"], "steps": 10, "token_budget": 256,
         "max_seq_len": 64, "micro_batch_tokens": 96, "nproc": 4,
         "lengths_file": null, "space_file": null,
         "proposal_file": null, "method": "dispatch_balanced_packing", "planner_url": null,
         "corpus": null, "tokenizer": null, "cache_dir": null,
         "optimizer_layout": null | {"dp", "tp", "pp"},
         "checkpoint_dir": null, "checkpoint_every": 0, "keep_checkpoints": 2, "fresh": false,
         "overwrite": false, "resume": null, "init_from": null,
         "tensorboard_dir": null, "synthesise": "proposal", "synthesis_evaluations": 16,
         "cluster_file": null,
         "runtime": {"device": "auto", "precision": "auto", "optimizer": "adamw", "lr": 0.001,
                     "seed": 0, "timeout_s": 60.0, "threads": 1, "grad_reduce_dtype": "auto",
                     "record_operations": false, "device_memory": null, "overlap_reduction": true,
                     "bucket_mb": 25.0, "allow_math_attention": false, "compile_layers": false,
                     "loss_chunk_tokens": 1024,
                     "betas": [0.9, 0.95],
                     "eps": 1e-08, "weight_decay": 0.1, "decay_embeddings": true,
                     "clip_grad_norm": 1.0 | null (never clip), "lr_schedule": "cosine",
                     "warmup_steps": 0, "min_lr": 0.0}}
    """
    record = Record(document)
    check_header(record, KIND, (1, 2, 3, SCHEMA_VERSION))
    runtime = record.optional_sub("runtime")
    top, nested = {}, {}
    for leaf in job_options(TrainConfig):
        if len(leaf.path) == 1:
            top[leaf.name] = _decoded(record, leaf)
        elif runtime is not None:
            nested[leaf.name] = _decoded(runtime, leaf)
    return build("", TrainConfig, **top, runtime=build("runtime", RuntimeOptions, **nested))


def read_train_config(path: str | Path) -> TrainConfig:
    return train_config_from_dict(read_json(path))


def write_train_config(path: str | Path, config: TrainConfig) -> None:
    write_json(path, train_config_to_dict(config))


def _value_at(config: object, path: tuple[str, ...]) -> object:
    for name in path:
        config = getattr(config, name)
    return config


def _encoded(leaf: Leaf, value: object) -> object:
    """The field's value as JSON holds it: an enum's value, a list for a tuple, the layout's
    degrees, null for an infinite number (``clip_grad_norm``: never clip)."""
    if value is None:
        return None
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, OptimizerLayout):
        return {"dp": value.dp, "tp": value.tp, "pp": value.pp}
    if isinstance(value, float) and math.isinf(value):
        return None
    return value


def _decoded(record: Record, leaf: Leaf) -> object:
    """The field from ``record``, its default when missing (a required field, ``steps``, is an integer)."""
    name, default = leaf.name, leaf.default
    if default is MISSING and leaf.kind is Kind.TEXTS:
        default = ()
    elif default is MISSING and leaf.optional:
        default = None
    if default is MISSING:
        return record.int(name)
    value = record.raw(name, default)
    if value is None and (leaf.optional or leaf.kind is Kind.NUMBER):
        return None if leaf.optional else math.inf
    if leaf.kind is Kind.INTEGER:
        return record.int(name, default)
    if leaf.kind is Kind.NUMBER:
        return record.float(name, default)
    if leaf.kind is Kind.SWITCH:
        return record.bool(name, default)
    if leaf.kind is Kind.TEXT:
        return record.str(name, default)
    if leaf.kind is Kind.CHOICE:
        return record.enum(name, leaf.enum, default)
    if leaf.kind is Kind.TEXTS:
        return record.strs(name, list(default))
    if leaf.kind is Kind.PAIR:
        return record.floats(name, list(default))
    layout = record.sub(name)
    return build(layout.path, OptimizerLayout, dp=layout.int("dp"), tp=layout.int("tp"), pp=layout.int("pp"))
