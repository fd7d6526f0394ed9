"""The training-config artifact: what ``hydraulis train --config`` reads and writes back resolved.

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
                 "bucket_mb": 25.0, "allow_math_attention": false, "loss_chunk_tokens": 1024,
                 "betas": [0.9, 0.95],
                 "eps": 1e-08, "weight_decay": 0.1, "decay_embeddings": true,
                 "clip_grad_norm": 1.0 | null (never clip), "lr_schedule": "cosine",
                 "warmup_steps": 0, "min_lr": 0.0}}

``hydraulis train --config`` also reads a TOML job file (:mod:`.job_file`).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from enum import Enum
from pathlib import Path
import math

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.errors import HydraulisError
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.layout.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype
from hydraulis.types import BatchingMethod, OptimizerLayout

KIND = "train_config"
SCHEMA_VERSION = 4
_OPTIONAL_STRINGS = ("lengths_file", "space_file", "proposal_file", "planner_url", "corpus", "tokenizer", "cache_dir",
                     "checkpoint_dir", "resume", "init_from", "tensorboard_dir", "cluster_file")
_ENUMS = {"device": DeviceKind, "precision": Precision, "grad_reduce_dtype": ReduceDtype, "optimizer": OptimizerKind,
          "lr_schedule": LrScheduleKind}


def train_config_to_dict(config: TrainConfig) -> dict:
    document = {"schema_version": SCHEMA_VERSION, "kind": KIND, **asdict(config)}
    document["strategies"] = list(config.strategies)
    document["method"] = config.method.value
    document["synthesise"] = config.synthesise.value
    document["runtime"] = {k: v.value if isinstance(v, Enum) else v for k, v in asdict(config.runtime).items()}
    document["runtime"]["betas"] = list(config.runtime.betas)
    if math.isinf(config.runtime.clip_grad_norm):
        document["runtime"]["clip_grad_norm"] = None
    return document


def train_config_from_dict(document: object) -> TrainConfig:
    record = Record(document)
    check_header(record, KIND, (1, 2, 3, SCHEMA_VERSION))
    runtime, layout = record.optional_sub("runtime"), record.optional_sub("optimizer_layout")
    method = record.str("method", BatchingMethod.DISPATCH_BALANCED_PACKING.value)
    try:
        batching = BatchingMethod(method)
    except ValueError:
        raise HydraulisError("method", method, f"must be one of {[m.value for m in BatchingMethod]}") from None
    return build("", TrainConfig,
        model=_optional_str(record, "model"),
        strategies=record.strs("strategies", []),
        steps=record.int("steps"),
        token_budget=_optional_int(record, "token_budget"),
        max_seq_len=_optional_int(record, "max_seq_len"),
        micro_batch_tokens=_optional_int(record, "micro_batch_tokens"),
        nproc=record.int("nproc", 0),
        method=batching,
        optimizer_layout=None if layout is None else build(layout.path, OptimizerLayout, dp=layout.int("dp"),
                                                           tp=layout.int("tp"), pp=layout.int("pp")),
        checkpoint_every=record.int("checkpoint_every", 0),
        keep_checkpoints=record.int("keep_checkpoints", 2),
        fresh=record.bool("fresh", False),
        overwrite=record.bool("overwrite", False),
        synthesise=record.enum("synthesise", Synthesise, Synthesise.PROPOSAL),
        synthesis_evaluations=record.int("synthesis_evaluations", SynthesisOptions.evaluations),
        runtime=RuntimeOptions() if runtime is None else _runtime_from_record(runtime),
        **{key: _optional_str(record, key) for key in _OPTIONAL_STRINGS},
    )


def read_train_config(path: str | Path) -> TrainConfig:
    return train_config_from_dict(read_json(path))


def write_train_config(path: str | Path, config: TrainConfig) -> None:
    write_json(path, train_config_to_dict(config))


def _runtime_from_record(record: Record) -> RuntimeOptions:
    defaults = RuntimeOptions()
    values = {}
    for spec in fields(RuntimeOptions):
        default = getattr(defaults, spec.name)
        if spec.name in _ENUMS:
            text = record.str(spec.name, default.value)
            try:
                values[spec.name] = _ENUMS[spec.name](text)
            except ValueError:
                raise HydraulisError(f"{record.path}.{spec.name}", text,
                                     f"must be one of {[e.value for e in _ENUMS[spec.name]]}") from None
        elif default is None:
            values[spec.name] = _optional_int(record, spec.name)
        elif spec.name == "betas":
            values[spec.name] = tuple(record.floats(spec.name, list(default)))
        elif spec.name == "clip_grad_norm":
            values[spec.name] = math.inf if record.raw(spec.name, default) is None else record.float(spec.name, default)
        elif isinstance(default, bool):
            values[spec.name] = record.bool(spec.name, default)
        elif isinstance(default, float):
            values[spec.name] = record.float(spec.name, default)
        else:
            values[spec.name] = record.int(spec.name, default)
    return build(record.path, RuntimeOptions, **values)


def _optional_int(record: Record, key: str) -> int | None:
    return None if record.raw(key, None) is None else record.int(key)


def _optional_str(record: Record, key: str) -> str | None:
    return None if record.raw(key, None) is None else record.str(key)
