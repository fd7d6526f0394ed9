"""The scheme-space artifact: versioned JSON, validated on load.

Layout (``schema_version`` 2)::

    {"schema_version": 2, "kind": "scheme_space",
     "model": {"name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
               "rope_theta", "norm_eps"},            (the last two only when not 10000 and 1e-5)
     "cluster": {"devices", "devices_per_node", "device"},
     "memory": {"device_memory_bytes", "safety_margin_bytes", "layer_state_bytes",
                "embedding_state_bytes", "sharded_state_fraction"},
     "pipeline_model": {"forward_fraction", "p2p_ms"}, "reduce_gbps", "communicator_ms",
     "provenance": {"source", "device", "created", "tool_version", "command", "software"},
     "schemes": [{"cp", "tp", "pp", "sp", "recompute", "a", "b", "c", "activation_bytes_per_token",
                  "overhead_bytes", "utilization_tokens",
                  "fit": null | {"r2", "median_rel_error", "max_rel_error", "points"}}]}

A scheme's options (:class:`~hydraulis.types.SchemeOptions`) are written only when they are not
the defaults: ``"sp": true`` (sequence parallelism) and ``"recompute": "selective" | "full"``;
the same degrees with other options are another entry of ``schemes``. Version 2 added them;
a version-1 file still loads, every scheme with the defaults (no sp, no recomputation), which is
what the runtime of version 1 ran. ``provenance.software`` and ``communicator_ms`` are optional
(absent: empty, 0).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.errors import HydraulisError
from hydraulis.types import (
    Cluster,
    FitQuality,
    MemoryModel,
    ModelSpec,
    PipelineModel,
    Provenance,
    Recompute,
    Scheme,
    SchemeProfile,
    SchemeSpace,
    SpaceSource,
    TimeCoefficients,
)

KIND = "scheme_space"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)

_MODEL_DEFAULTS = {f.name: f.default for f in fields(ModelSpec) if f.default is not MISSING}
"""Model fields written only when they differ from these (files without them still load)."""


def scheme_space_to_dict(space: SchemeSpace) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "model": model_to_dict(space.model),
        "cluster": asdict(space.cluster),
        "memory": asdict(space.memory),
        "pipeline_model": asdict(space.pipeline_model),
        "reduce_gbps": space.reduce_gbps,
        "communicator_ms": space.communicator_ms,
        "provenance": {**asdict(space.provenance), "source": space.provenance.source.value},
        "schemes": [_profile_to_dict(p) for p in space.profiles],
    }


def scheme_space_from_dict(document: object) -> SchemeSpace:
    record = Record(document)
    check_header(record, KIND, READABLE_VERSIONS)
    model = model_from_record(record.sub("model"))
    cluster = record.sub("cluster")
    memory = record.sub("memory")
    provenance = record.sub("provenance")
    source = provenance.str("source")
    try:
        source_kind = SpaceSource(source)
    except ValueError:
        raise HydraulisError("provenance.source", source,
                             f"must be one of {[s.value for s in SpaceSource]}") from None
    return build("", SchemeSpace,
        model=model,
        cluster=build("cluster", Cluster, devices=cluster.int("devices"),
                      devices_per_node=cluster.int("devices_per_node"), device=cluster.str("device")),
        memory=build("memory", MemoryModel,
                     device_memory_bytes=memory.int("device_memory_bytes"),
                     safety_margin_bytes=memory.int("safety_margin_bytes"),
                     layer_state_bytes=memory.float("layer_state_bytes"),
                     embedding_state_bytes=memory.float("embedding_state_bytes"),
                     sharded_state_fraction=memory.float("sharded_state_fraction")),
        profiles=tuple(_profile_from_record(r) for r in record.records("schemes")),
        provenance=Provenance(source=source_kind, device=provenance.str("device"),
                              created=provenance.str("created"),
                              tool_version=provenance.str("tool_version"),
                              command=provenance.str("command", ""),
                              software=provenance.str("software", "")),
        pipeline_model=pipeline_model_from_record(record.sub("pipeline_model")),
        reduce_gbps=record.float("reduce_gbps", 0.0),
        communicator_ms=record.float("communicator_ms", 0.0),
    )


def read_scheme_space(path: str | Path) -> SchemeSpace:
    return scheme_space_from_dict(read_json(path))


def write_scheme_space(path: str | Path, space: SchemeSpace) -> None:
    write_json(path, scheme_space_to_dict(space))


def model_to_dict(model: ModelSpec) -> dict:
    """The model's fields; ``rope_theta`` and ``norm_eps`` only when they are not the defaults."""
    document = asdict(model)
    for name in _MODEL_DEFAULTS:
        if document[name] == _MODEL_DEFAULTS[name]:
            del document[name]
    return document


def model_from_record(record: Record) -> ModelSpec:
    return build(record.path, ModelSpec, name=record.str("name"), layers=record.int("layers"),
                 hidden=record.int("hidden"), heads=record.int("heads"),
                 kv_heads=record.int("kv_heads"), ffn_hidden=record.int("ffn_hidden"),
                 vocab=record.int("vocab"),
                 **{name: record.float(name, default) for name, default in _MODEL_DEFAULTS.items()})



def pipeline_model_from_record(record: Record) -> PipelineModel:
    return build(record.path, PipelineModel, forward_fraction=record.float("forward_fraction"),
                 p2p_ms=record.float("p2p_ms"))


def scheme_to_dict(scheme: Scheme) -> dict:
    """``{"cp", "tp", "pp"}``, plus ``"sp"``, ``"recompute"`` and ``"recompute_layers"`` when
    they are not the defaults."""
    options = {"sp": scheme.sp} if scheme.sp else {}
    if scheme.recompute is not Recompute.NONE:
        options["recompute"] = scheme.recompute.value
    if scheme.recompute_layers:
        options["recompute_layers"] = list(scheme.recompute_layers)
    return {"cp": scheme.cp, "tp": scheme.tp, "pp": scheme.pp, **options}


def scheme_from_record(record: Record) -> Scheme:
    return build(record.path, Scheme, cp=record.int("cp"), tp=record.int("tp"), pp=record.int("pp"),
                 sp=record.bool("sp", False), recompute=record.enum("recompute", Recompute, Recompute.NONE),
                 recompute_layers=record.ints("recompute_layers", []))


def time_from_record(record: Record) -> TimeCoefficients:
    return build(record.path, TimeCoefficients, a=record.float("a"), b=record.float("b"), c=record.float("c"))


def _profile_to_dict(profile: SchemeProfile) -> dict:
    return {
        **scheme_to_dict(profile.scheme),
        **asdict(profile.time),
        "activation_bytes_per_token": profile.activation_bytes_per_token,
        "overhead_bytes": profile.overhead_bytes,
        "utilization_tokens": profile.utilization_tokens,
        "fit": None if profile.fit is None else asdict(profile.fit),
    }


def _profile_from_record(record: Record) -> SchemeProfile:
    fit = record.optional_sub("fit")
    return build(record.path, SchemeProfile,
        scheme=scheme_from_record(record),
        time=time_from_record(record),
        activation_bytes_per_token=record.float("activation_bytes_per_token"),
        overhead_bytes=record.int("overhead_bytes"),
        utilization_tokens=record.int("utilization_tokens", 0),
        fit=None if fit is None else FitQuality(r2=fit.float("r2"),
                                                median_rel_error=fit.float("median_rel_error"),
                                                max_rel_error=fit.float("max_rel_error"),
                                                points=fit.int("points")),
    )
