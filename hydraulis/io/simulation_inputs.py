"""The simulation's inputs, read or made where the command line names them (the I/O edge).

* Scheme space: a scheme-space JSON file; a bundled measured pool (``bundled:7b``,
  ``bundled:13b``, imported for the cluster); or, with neither, an analytic space for a model
  and device preset on the cluster (cp, tp, pp ∈ {1, 2, 4, 8}).
* Scheme spaces of a mixed cluster (``--cluster``): per device group its measured space or the
  analytic one of its device preset.
* Workload (document lengths): a lengths file; a corpus, tokenized offline
  (:func:`hydraulis.data.measure.measure_corpus`); or, with neither, synthetic long-tailed
  lengths (:func:`hydraulis.data.synth.synth_lengths`, its default shape).

Each returns the value and a description saved with the simulation's resolved configuration.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hydraulis import __version__
from hydraulis.artifacts import read_json, read_lengths, read_scheme_space, timestamp
from hydraulis.artifacts.cluster import read_cluster
from hydraulis.artifacts.original_pool import import_original_pool, pool_shape
from hydraulis.base.cluster import ClusterSpaces
from hydraulis.base.errors import HydraulisError, require_int
from hydraulis.base.presets import device_preset, model_matching, model_preset, pool_location
from hydraulis.base.types import Cluster, SchemeSpace
from hydraulis.data.corpus import CorpusSource
from hydraulis.data.measure import measure_corpus
from hydraulis.data.synth import LongTail, synth_lengths
from hydraulis.data.tokenizer import TokenizerSpec
from hydraulis.profiler.analytic import analytic_scheme_space
from hydraulis.profiler.cluster import group_scheme_space

ANALYTIC_DEGREES = (1, 2, 4, 8)
POOL_DEVICE = "a800-80g"
"""The device the bundled pools were measured on."""


def scheme_space_for(space: str | None, model: str, device: str, devices: int, devices_per_node: int | None,
                     command: str = "", segments: bool = False) -> tuple[SchemeSpace, dict]:
    """The scheme space of the module docstring for ``devices`` devices, and its description;
    an analytic one with ``segments`` composes every variant of its schemes."""
    require_int(devices, "devices", minimum=1)
    if space is None:
        spec = device_preset(device)
        cluster = Cluster(devices, devices_per_node or spec.devices_per_node, spec.name)
        made = analytic_scheme_space(model_preset(model), spec, cluster, ANALYTIC_DEGREES, ANALYTIC_DEGREES,
                                     ANALYTIC_DEGREES, created=timestamp(), tool_version=__version__, command=command,
                                     segments=segments)
        return made, {"source": "analytic", "model": model, "device": device, "segments": segments}
    if space.startswith("bundled:"):
        document = read_json(pool_location(space))
        spec = device_preset(POOL_DEVICE)
        made = import_original_pool(document, model_matching(*pool_shape(document)), devices, spec.name,
                                     spec.inter_node_gbps, created=timestamp(), tool_version=__version__,
                                     command=command, communicator_ms=spec.communicator_ms)
        return made, {"source": space, "model": made.model.name, "device": spec.name}
    read = read_scheme_space(space)
    return read, {"source": space, "model": read.model.name, "device": read.cluster.device}


def workload_lengths(lengths: str | None, corpus: str | None, synthetic_docs: int, seed: int,
                     cache_dir: Path | None = None) -> tuple[np.ndarray, dict]:
    """Document lengths of the module docstring, and their description."""
    if lengths is not None and corpus is not None:
        raise HydraulisError("--corpus", corpus, "and --lengths exclude each other; give one workload")
    if lengths is not None:
        return read_lengths(lengths), {"source": "lengths", "path": lengths}
    if corpus is not None:
        caches = (None, None) if cache_dir is None else (cache_dir / "tokenizers", cache_dir / "datasets")
        measured = measure_corpus(CorpusSource(Path(corpus)), TokenizerSpec(cache_dir=caches[0]), caches[1])
        return measured.lengths, {"source": "corpus", "path": corpus, "tokens": int(measured.tokenized.tokens)}
    shape = LongTail()
    return synth_lengths(synthetic_docs, shape, seed), {"source": "synthetic", "documents": synthetic_docs,
                                                       "seed": seed, "shape": vars(shape)}


def cluster_spaces_for(cluster_path: str, model: str, command: str = "") -> tuple[ClusterSpaces, dict]:
    """The cluster description at ``cluster_path`` with a scheme space per group: its measured
    space, or the analytic one of ``model`` on its device preset (with segments); and its description."""
    cluster = read_cluster(cluster_path)
    spaces = tuple(read_scheme_space(g.space) if g.space else
                   group_scheme_space(g, model_preset(model), timestamp(), __version__, command)
                   for g in cluster.groups)
    facts = {"cluster": cluster_path, "model": model,
             "groups": [{"name": g.name, "device": g.device, "devices": g.devices, "space": g.space or "analytic"}
                        for g in cluster.groups]}
    return ClusterSpaces(cluster, spaces), facts
