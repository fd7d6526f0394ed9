"""The scheme-space artifact: versioned JSON, validated on load.

The details: :func:`scheme_space_from_dict`."""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json, write_json
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names, device_preset
from hydraulis.base.segments import Block, Segments
from hydraulis.base.stages import Stage
from hydraulis.base.types import (
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
SCHEMA_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
BLOCKS = ("layer", "selective", "full", "first", "middle", "last", "only")

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
        "reduce_overlap": space.reduce_overlap,
        "grad_reduce_bytes": space.grad_reduce_bytes,
        "provenance": {**asdict(space.provenance), "source": space.provenance.source.value},
        "schemes": [_profile_to_dict(p) for p in space.profiles],
        **({"segments": [_segments_to_dict(s) for s in space.segments]} if space.segments else {}),
    }


def scheme_space_from_dict(document: object) -> SchemeSpace:
    """Layout (``schema_version`` 3)::

        {"schema_version": 3, "kind": "scheme_space",
         "model": {"name", "layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab",
                   "rope_theta", "norm_eps", …}, (defaulted fields only when not their defaults:
                   10000, 1e-5, and a mixture of experts' "experts", "top_k", "shared_experts", …)
         "cluster": {"devices", "devices_per_node", "device"},
         "memory": {"device_memory_bytes", "safety_margin_bytes", "layer_state_bytes",
                    "embedding_state_bytes", "sharded_state_fraction", "communicator_peer_bytes" (0 when absent)},
         "pipeline_model": {"forward_fraction", "p2p_ms"}, "reduce_gbps", "communicator_ms", "reduce_overlap",
         "grad_reduce_bytes",
         "provenance": {"source", "device", "created", "tool_version", "command", "software"},
         "schemes": [{"cp", "tp", "pp", "sp", "recompute", "recompute_layers", "a", "b", "c",
                      "activation_bytes_per_token", "overhead_bytes", "utilization_tokens",
                      "fit": null | {"r2", "median_rel_error", "max_rel_error", "points"}}],
         "segments": [{"cp", "tp", "sp", "layer", "selective", "full", "first", "middle", "last", "only",
                       "network_hand_off": {"a", "b", "c"}}]}          (a space with variants only)

    each block of ``segments`` (:class:`~hydraulis.base.segments.Block`) being
    ``{"a", "b", "c", "kept_bytes_per_token", "transient_bytes_per_token"}`` and, for the ends of a
    stage where not zero, ``"input_bytes_per_token"`` and ``"released_bytes_per_token"``.

    A scheme's options (:class:`~hydraulis.base.scheme.SchemeOptions`) are written only when they are not
    the defaults: ``"sp": true`` (sequence parallelism), ``"recompute": "selective" | "full"`` and
    ``"recompute_layers": [K, …]`` (full recomputation of the first K layers of each stage), ``"ep":
    N`` (expert parallelism); the
    same degrees with other options are another entry of ``schemes``. Version 2 added the options,
    version 3 the segments (:mod:`hydraulis.base.segments`) of a space whose variants are composed
    rather than listed. A version-1 file still loads, every scheme with the defaults (no sp, no
    recomputation), which is what the runtime of version 1 ran; a version-2 file loads without
    segments. ``provenance.software`` and ``communicator_ms`` are optional (absent: empty, 0);
    ``reduce_overlap`` (``ω``, design §6.3: measured by the profiler's reduction job) too — absent,
    the cluster's device preset's (:func:`~hydraulis.base.presets.device_preset`; 0 for a device
    without one); ``grad_reduce_bytes`` (the bytes per gradient the reduction sends: a new space
    holds the runtime's default on its device, :meth:`~hydraulis.sharding.kinds.ReduceDtype.element_bytes`,
    4 on ``cpu``, 2 elsewhere) too — absent, 2: a file written before the field fitted its
    ``reduce_gbps`` to 2-byte gradients, and its predictions stay what they were.
    """
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
                     sharded_state_fraction=memory.float("sharded_state_fraction"),
                     communicator_peer_bytes=memory.int("communicator_peer_bytes", 0)),
        profiles=tuple(_profile_from_record(r) for r in record.records("schemes")),
        provenance=Provenance(source=source_kind, device=provenance.str("device"),
                              created=provenance.str("created"),
                              tool_version=provenance.str("tool_version"),
                              command=provenance.str("command", ""),
                              software=provenance.str("software", "")),
        pipeline_model=pipeline_model_from_record(record.sub("pipeline_model")),
        reduce_gbps=record.float("reduce_gbps", 0.0),
        segments=tuple(_segments_from_record(r) for r in record.records("segments"))
        if record.raw("segments", None) is not None else (),
        communicator_ms=record.float("communicator_ms", 0.0),
        reduce_overlap=record.float("reduce_overlap", _preset_overlap(cluster.str("device"))),
        grad_reduce_bytes=record.int("grad_reduce_bytes", 2),
    )


def _preset_overlap(device: str) -> float:
    """The device preset's ``reduce_overlap`` (0 for a device without a preset)."""
    return device_preset(device).reduce_overlap if device in device_names() else 0.0


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
                 **{name: _typed(record, name, default) for name, default in _MODEL_DEFAULTS.items()})


def _typed(record: Record, name: str, default):
    """A defaulted model field read as its default's type (bool, int or float)."""
    if isinstance(default, bool):
        return record.bool(name, default)
    return record.int(name, default) if isinstance(default, int) else record.float(name, default)



def pipeline_model_from_record(record: Record) -> PipelineModel:
    return build(record.path, PipelineModel, forward_fraction=record.float("forward_fraction"),
                 p2p_ms=record.float("p2p_ms"))


def scheme_to_dict(scheme: Scheme) -> dict:
    """``{"cp", "tp", "pp"}``, plus ``"sp"``, ``"recompute"``, ``"recompute_layers"`` and
    ``"stages"`` (``[{"tp", "layers", "group"}, …]``, a staged scheme) when they are not the
    defaults."""
    options: dict = {"sp": scheme.sp} if scheme.sp else {}
    if scheme.recompute is not Recompute.NONE:
        options["recompute"] = scheme.recompute.value
    if scheme.recompute_layers:
        options["recompute_layers"] = list(scheme.recompute_layers)
    if scheme.ep > 1:
        options["ep"] = scheme.ep
    if scheme.stages:
        options["stages"] = [{"tp": s.tp, "layers": s.layers, "group": s.group} for s in scheme.stages]
    return {"cp": scheme.cp, "tp": scheme.tp, "pp": scheme.pp, **options}


def scheme_from_record(record: Record) -> Scheme:
    stages = tuple(build(r.path, Stage, tp=r.int("tp"), layers=r.int("layers"), group=r.str("group", ""))
                   for r in (record.records("stages") if record.raw("stages", None) is not None else ()))
    return build(record.path, Scheme, cp=record.int("cp"), tp=record.int("tp"), pp=record.int("pp"),
                 sp=record.bool("sp", False), recompute=record.enum("recompute", Recompute, Recompute.NONE),
                 recompute_layers=record.ints("recompute_layers", []), stages=stages, ep=record.int("ep", 1))


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


def _segments_to_dict(segments: Segments) -> dict:
    return {"cp": segments.cp, "tp": segments.tp, "sp": segments.sp,
            **{name: _block_to_dict(getattr(segments, name)) for name in BLOCKS},
            "network_hand_off": asdict(segments.network_hand_off)}


ENDS_BYTES = ("input_bytes_per_token", "released_bytes_per_token")
"""Bytes only the ends of a stage have, written when not zero."""


def _block_to_dict(block: Block) -> dict:
    ends = {name: getattr(block, name) for name in ENDS_BYTES if getattr(block, name)}
    return {**asdict(block.time), "kept_bytes_per_token": block.kept_bytes_per_token,
            "transient_bytes_per_token": block.transient_bytes_per_token, **ends}


def _segments_from_record(record: Record) -> Segments:
    def block(part: Record) -> Block:
        return build(part.path, Block, time=time_from_record(part),
                     kept_bytes_per_token=part.float("kept_bytes_per_token"),
                     transient_bytes_per_token=part.float("transient_bytes_per_token"),
                     **{name: part.float(name, 0.0) for name in ENDS_BYTES})

    return build(record.path, Segments, cp=record.int("cp"), tp=record.int("tp"), sp=record.bool("sp"),
                 network_hand_off=time_from_record(record.sub("network_hand_off")),
                 **{name: block(record.sub(name)) for name in BLOCKS})
