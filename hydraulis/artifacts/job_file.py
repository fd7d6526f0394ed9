"""The TOML job file of ``hydraulis train --config job.toml``: every flag of ``hydraulis train``
is a key (its name with ``_`` for ``-``), grouped in sections as in torchtitan's job files.

Layout (every key optional; ``examples/configs/tiny.toml`` is a complete job)::

    [model]         model = "tiny"                  init_from = "HF_DIR"
    [training]      steps = 200                     token_budget = 256    max_seq_len = 64
                    micro_batch_tokens = 96         seed = 0              corpus = "corpus.jsonl"
                    tokenizer = "tokenizer.json"    cache_dir = "cache"   lengths = "lengths.txt"
    [parallelism]   strategy = ["1,2,1+1,1,2", "1,1,2x2"]                 proposal = "proposal.json"
                    method = "dispatch_balanced_packing"                  synthesise = "proposal"
                    synthesis_evaluations = 16      planner_url = "http://…"   space = "space.json"
                    cluster = "cluster.json"        optimizer_layout = "4,1,1"  nproc = 4
    [optimizer]     optimizer = "adamw"   lr = 1e-3   betas = [0.9, 0.95]   eps = 1e-8
                    weight_decay = 0.1    decay_embeddings = true   clip_grad_norm = 1.0
    [lr_scheduler]  lr_schedule = "cosine"   warmup_steps = 20   min_lr = 1e-4
    [runtime]       device = "cpu"   precision = "fp32"   grad_reduce_dtype = "fp32"
                    timeout_s = 60.0   threads = 1   device_memory = 8_000_000_000
    [checkpoint]    checkpoint_dir = "checkpoints"   checkpoint_every = 50   resume = "checkpoints"
    [metrics]       tensorboard = "tensorboard"   record_operations = false

:func:`read_job_file` checks every key's section and type (an integer where an integer is due,
an enum's value where one is due) and returns the keys as flag destinations; the command line
applies them as if given as flags, its own flags overriding them, and the job's configuration
checks the ranges (:mod:`hydraulis.job.config`).
"""

from __future__ import annotations

import tomllib
from enum import Enum
from pathlib import Path

from hydraulis.dispatch.synthesis import Synthesise
from hydraulis.errors import HydraulisError
from hydraulis.job.schedule import LrScheduleKind
from hydraulis.layout.kinds import DeviceKind, OptimizerKind, Precision, ReduceDtype
from hydraulis.types import BatchingMethod

PAIR = "pair"
"""Two numbers (``betas``)."""
STRINGS = "strings"
"""A list of strings (``strategy``: one SPEC per cycled strategy)."""
SECTIONS: dict[str, dict[str, object]] = {
    "model": {"model": str, "init_from": str},
    "training": {"steps": int, "token_budget": int, "max_seq_len": int, "micro_batch_tokens": int, "seed": int,
                 "corpus": str, "tokenizer": str, "cache_dir": str, "lengths": str},
    "parallelism": {"strategy": STRINGS, "proposal": str, "method": BatchingMethod, "synthesise": Synthesise,
                    "synthesis_evaluations": int, "planner_url": str, "space": str, "cluster": str,
                    "optimizer_layout": str, "nproc": int},
    "optimizer": {"optimizer": OptimizerKind, "lr": float, "betas": PAIR, "eps": float, "weight_decay": float,
                  "decay_embeddings": bool, "clip_grad_norm": float},
    "lr_scheduler": {"lr_schedule": LrScheduleKind, "warmup_steps": int, "min_lr": float},
    "runtime": {"device": DeviceKind, "precision": Precision, "grad_reduce_dtype": ReduceDtype, "timeout_s": float,
                "threads": int, "device_memory": int, "loss_chunk_tokens": int},
    "checkpoint": {"checkpoint_dir": str, "checkpoint_every": int, "resume": str},
    "metrics": {"tensorboard": str, "record_operations": bool},
}
"""Each section's keys and the type of their values."""


def read_job_file(path: str | Path) -> dict[str, object]:
    """The file's keys by flag destination (``betas`` a tuple, ``strategy`` a list of strings,
    enums their values); :class:`HydraulisError` names the first unknown section or key or the
    first value of the wrong type."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HydraulisError("config", str(path), "does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise HydraulisError("config", str(path), f"is not a TOML file: {error}") from None
    values = {}
    for section, keys in document.items():
        if section not in SECTIONS:
            raise HydraulisError(f"{path.name}: [{section}]", keys, f"is not a section; sections: {', '.join(SECTIONS)}")
        if not isinstance(keys, dict):
            raise HydraulisError(f"{path.name}: {section}", keys, "must be a [section] of keys")
        for key, value in keys.items():
            kind = SECTIONS[section].get(key)
            if kind is None:
                raise HydraulisError(f"{path.name}: {section}.{key}", value,
                                     f"is not a key of [{section}]; its keys: {', '.join(SECTIONS[section])}")
            values[key] = _checked(f"{path.name}: {section}.{key}", value, kind)
    return values


def _checked(field: str, value: object, kind: object) -> object:
    if kind is PAIR:
        if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)):
            raise HydraulisError(field, value, "must be two numbers, e.g. [0.9, 0.95]")
        return tuple(float(v) for v in value)
    if kind is STRINGS:
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise HydraulisError(field, value, "must be a list of strings, e.g. [\"1,2,1+1,1,2\"]")
        return value
    if isinstance(kind, type) and issubclass(kind, Enum):
        if value not in {member.value for member in kind}:
            raise HydraulisError(field, value, f"must be one of {[member.value for member in kind]}")
        return value
    if kind is float:
        if not _is_number(value):
            raise HydraulisError(field, value, "must be a number")
        return float(value)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise HydraulisError(field, value, "must be an integer")
    if not isinstance(value, kind):
        raise HydraulisError(field, value, f"must be {'true or false' if kind is bool else 'a string'}")
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
