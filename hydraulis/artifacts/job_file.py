"""The TOML job file of ``hydraulis train --config job.toml``: every option of the job's tree
(:mod:`hydraulis.job.options`) is a key of its section, named as its flag with ``_`` for ``-``
(torchtitan's job files are the model); every key is a flag. The sections and their keys are
in :func:`read_job_file`.

:func:`read_job_file` checks every key's section, type and limit and returns the keys as flag
destinations; the command line applies them as if given as flags, its own flags overriding
them, and the job's configuration checks the relations (:mod:`hydraulis.job.config`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from hydraulis.base.errors import HydraulisError
from hydraulis.job.config import TrainConfig
from hydraulis.job.options import Kind, Leaf, Section, job_options


def job_file_keys() -> dict[str, dict[str, Leaf]]:
    """Each section's keys and their options, derived from the job's option tree."""
    sections: dict[str, dict[str, Leaf]] = {section.value: {} for section in Section}
    for leaf in job_options(TrainConfig):
        sections[leaf.option.section.value][leaf.key] = leaf
    return sections


def read_job_file(path: str | Path) -> dict[str, object]:
    """The file's keys by flag destination (``betas`` a tuple, ``strategy`` a list of strings,
    enums their values); :class:`HydraulisError` names the first unknown section or key or the
    first value of the wrong type or out of its limit.

    Layout (every key optional; ``examples/configs/tiny.toml`` is a complete job; ``hydraulis train
    --help`` lists each section's keys as its flags)::

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
                        overlap_reduction = false   bucket_mb = 25   allow_math_attention = false
        [checkpoint]    checkpoint_dir = "checkpoints"   checkpoint_every = 50   keep_checkpoints = 2
                        resume = "checkpoints"   no_resume = false   overwrite_checkpoints = false
        [metrics]       tensorboard = "tensorboard"   record_operations = false
    """
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise HydraulisError("config", str(path), "does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise HydraulisError("config", str(path), f"is not a TOML file: {error}") from None
    sections = job_file_keys()
    values = {}
    for section, keys in document.items():
        if section not in sections:
            raise HydraulisError(f"{path.name}: [{section}]", keys, f"is not a section; sections: {', '.join(sections)}")
        if not isinstance(keys, dict):
            raise HydraulisError(f"{path.name}: {section}", keys, "must be a [section] of keys")
        for key, value in keys.items():
            leaf = sections[section].get(key)
            if leaf is None:
                raise HydraulisError(f"{path.name}: {section}.{key}", value,
                                     f"is not a key of [{section}]; its keys: {', '.join(sections[section])}")
            values[key] = _checked(f"{path.name}: {section}.{key}", value, leaf)
    return values


def _checked(field: str, value: object, leaf: Leaf) -> object:
    kind, limit = leaf.kind, leaf.option.limit
    if kind is Kind.PAIR:
        if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)):
            raise HydraulisError(field, value, "must be two numbers, e.g. [0.9, 0.95]")
        return tuple(limit.check(v, field) if limit else float(v) for v in value)
    if kind is Kind.TEXTS:
        if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
            raise HydraulisError(field, value, "must be a list of strings, e.g. [\"1,2,1+1,1,2\"]")
        return value
    if kind is Kind.CHOICE:
        if value not in {member.value for member in leaf.enum}:
            raise HydraulisError(field, value, f"must be one of {[member.value for member in leaf.enum]}")
        return value
    if kind is Kind.NUMBER and not _is_number(value):
        raise HydraulisError(field, value, "must be a number")
    if kind is Kind.INTEGER and (isinstance(value, bool) or not isinstance(value, int)):
        raise HydraulisError(field, value, "must be an integer")
    if kind is Kind.SWITCH and not isinstance(value, bool):
        raise HydraulisError(field, value, "must be true or false")
    if kind in (Kind.TEXT, Kind.LAYOUT) and not isinstance(value, str):
        raise HydraulisError(field, value, "must be a string")
    if leaf.option.choices is not None and value not in leaf.option.choices():
        raise HydraulisError(field, value, f"must be one of {list(leaf.option.choices())}")
    return limit.check(value, field) if limit is not None else value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
