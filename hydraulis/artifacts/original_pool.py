"""Import the original Hydraulis system's "strategy pool" format into a scheme space.

The pool (``resources/reference_pools/README.md`` explains every field) gives per ``(tp, pp)``
the per-stage coefficients ``a, b, c`` and a memory regression. The mapping, with ``cp = 1``:

* ``a, b, c``                → the scheme's :class:`TimeCoefficients` (same units, ms);
* ``B·H²``                   → ``memory.layer_state_bytes`` (model-state bytes of one layer);
* ``16·H·V``                 → ``memory.embedding_state_bytes`` (one embedding/head matrix);
* ``alpha``                  → ``memory.sharded_state_fraction``;
* ``L·(H/tp)·A[tp]``         → ``activation_bytes_per_token`` (1F1B keeps ``L`` layers' worth);
* ``gap[...]``               → ``overhead_bytes``, keyed by the tensor-parallel group:
  ``gpu1``/``gpu2``/``gpu4`` for tp 1/2/4, ``node`` for tp ≥ 8;
* ``gpu_memory_bound``, ``safe_bound`` → ``memory.device_memory_bytes``, ``safety_margin_bytes``;
* ``utilization_seqlen[tp]`` → ``utilization_tokens``.

With these, :func:`hydraulis.cost.memory.memory_breakdown` reproduces the original
``max_seq_len`` formula (the embedding/head terms follow the compute layout for ``1 − α`` and the
optimizer layout for ``α``).
"""

from __future__ import annotations

from hydraulis.artifacts.record import Record
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import (
    Cluster,
    MemoryModel,
    ModelSpec,
    Provenance,
    Scheme,
    SchemeProfile,
    SchemeSpace,
    SpaceSource,
    TimeCoefficients,
)

EMBEDDING_STATE_BYTES_PER_PARAM = 16


def import_original_pool(
    document: object,
    model: ModelSpec,
    devices: int,
    device: str,
    reduce_gbps: float,
    created: str,
    tool_version: str,
    command: str = "",
    communicator_ms: float = 0.0,
) -> SchemeSpace:
    """Convert a parsed pool ``document`` for ``model`` (whose H, L, V must match the pool's);
    ``reduce_gbps`` and ``communicator_ms`` come from the device, which the pool does not describe."""
    pool = Record(document)
    shape = pool.sub("model_config")
    hidden, layers, vocab = shape.int("H"), shape.int("L"), shape.int("V")
    for name, given, expected in (("H", hidden, model.hidden), ("L", layers, model.layers), ("V", vocab, model.vocab)):
        if given != expected:
            raise HydraulisError(f"model_config.{name}", given, f"differs from model {model.name}'s {expected}")
    regression = pool.sub("memory_regression")
    cluster = pool.sub("cluster_config")
    memory = MemoryModel(
        device_memory_bytes=cluster.int("gpu_memory_bound"),
        safety_margin_bytes=regression.int("safe_bound"),
        layer_state_bytes=regression.float("B") * hidden * hidden,
        embedding_state_bytes=float(EMBEDDING_STATE_BYTES_PER_PARAM * hidden * vocab),
        sharded_state_fraction=regression.float("alpha"),
    )
    per_token = regression.sub("A")
    gaps = regression.sub("gap")
    utilization = cluster.sub("utilization_seqlen")
    profiles = []
    for entry in pool.records("strategies"):
        tp, pp = entry.int("tp"), entry.int("pp")
        profiles.append(SchemeProfile(
            scheme=Scheme(cp=1, tp=tp, pp=pp),
            time=TimeCoefficients(a=entry.float("a"), b=entry.float("b"), c=entry.float("c")),
            activation_bytes_per_token=layers * hidden / tp * per_token.float(f"tp{tp}"),
            overhead_bytes=gaps.int(_gap_key(tp)),
            utilization_tokens=utilization.int(f"tp{tp}", 0),
        ))
    return SchemeSpace(
        model=model,
        cluster=Cluster(devices=devices, devices_per_node=cluster.int("gpus_per_node"), device=device),
        memory=memory,
        profiles=tuple(profiles),
        provenance=Provenance(SpaceSource.IMPORTED, device, created, tool_version, command),
        reduce_gbps=reduce_gbps,
        communicator_ms=communicator_ms,
    )


def pool_shape(document: object) -> tuple[int, int, int]:
    """The pool's ``(H, L, V)``, to find the matching model preset."""
    shape = Record(document).sub("model_config")
    return shape.int("H"), shape.int("L"), shape.int("V")


def _gap_key(tp: int) -> str:
    return f"gpu{tp}" if tp < 8 else "node"
