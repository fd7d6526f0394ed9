"""The cluster description artifact (``--cluster cluster.json``, design §7.4)::

    {"schema_version": 1, "kind": "cluster",
     "groups": [{"name": "a100", "device": "a100-80g", "nodes": 2, "devices_per_node": 8},
                {"name": "h100", "device": "h100-80g", "nodes": 2, "devices_per_node": 8,
                 "space": "spaces/h100.json"}],
     "links": [{"groups": ["a100", "h100"], "gbps": 25.0}]}

``device`` must be a device preset; ``space`` (optional) is a measured scheme space, a path
relative to the cluster file, which :func:`read_cluster` resolves.
"""

from __future__ import annotations

from pathlib import Path

from hydraulis.artifacts.record import Record, build, check_header, read_json
from hydraulis.base.cluster import ClusterDescription, DeviceGroup, GroupLink
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import device_names

KIND = "cluster"
SCHEMA_VERSION = 1


def cluster_to_dict(cluster: ClusterDescription) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "groups": [{"name": g.name, "device": g.device, "nodes": g.nodes, "devices_per_node": g.devices_per_node,
                    **({"space": g.space} if g.space else {})} for g in cluster.groups],
        "links": [{"groups": [link.first, link.second], "gbps": link.gbps} for link in cluster.links],
    }


def cluster_from_dict(document: object, base: Path | None = None) -> ClusterDescription:
    """The description in ``document``; a group's ``space`` is resolved against ``base``."""
    record = Record(document)
    check_header(record, KIND, (SCHEMA_VERSION,))
    groups = []
    for part in record.records("groups"):
        device = part.str("device")
        if device not in device_names():
            raise HydraulisError(f"{part.path}.device", device,
                                 f"is not a device preset; choose one of {', '.join(device_names())}")
        space = part.str("space", "")
        if space and base is not None and not Path(space).is_absolute():
            space = str(base / space)
        groups.append(build(part.path, DeviceGroup, name=part.str("name"), device=device, nodes=part.int("nodes"),
                            devices_per_node=part.int("devices_per_node"), space=space))
    links = []
    for part in record.records("links") if record.raw("links", None) is not None else []:
        ends = part.strs("groups")
        if len(ends) != 2:
            raise HydraulisError(f"{part.path}.groups", list(ends), "must name two device groups")
        links.append(build(part.path, GroupLink, first=ends[0], second=ends[1], gbps=part.float("gbps")))
    return build("", ClusterDescription, groups=tuple(groups), links=tuple(links))


def read_cluster(path: str | Path) -> ClusterDescription:
    return cluster_from_dict(read_json(path), Path(path).parent)

