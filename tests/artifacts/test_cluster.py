"""The cluster description: round trip, the example file, and bad input naming the field."""

import copy
import json

import pytest

from hydraulis.artifacts.cluster import cluster_from_dict, cluster_to_dict, read_cluster
from hydraulis.base.cluster import ClusterDescription, DeviceGroup, GroupLink
from hydraulis.base.errors import HydraulisError

EXAMPLE = "examples/clusters/a100_h100.json"


def test_example_reads_and_round_trips():
    cluster = read_cluster(EXAMPLE)
    assert cluster.names == ("a100", "h100") and cluster.devices == 32
    assert cluster.link_gbps("h100", "a100") == 25.0
    assert cluster_from_dict(cluster_to_dict(cluster)) == cluster


def test_measured_space_is_resolved_against_the_file(tmp_path):
    document = json.loads(open(EXAMPLE).read())
    document["groups"][1]["space"] = "spaces/h100.json"
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    assert read_cluster(path).group("h100").space == str(tmp_path / "spaces" / "h100.json")


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d["groups"][0].__setitem__("device", "b200"), "groups[0].device"),
    (lambda d: d["groups"][1].__setitem__("nodes", 0), "groups[1].nodes"),
    (lambda d: d["groups"][0].__setitem__("devices_per_node", 0), "groups[0].devices_per_node"),
    (lambda d: d["groups"][1].__setitem__("name", "a100"), "groups[1].name"),
    (lambda d: d["links"][0].__setitem__("gbps", 0), "links[0].gbps"),
    (lambda d: d["links"][0].__setitem__("groups", ["a100", "v100"]), "links[0].groups"),
    (lambda d: d.__setitem__("links", []), "links"),
    (lambda d: d.__setitem__("schema_version", 9), "schema_version"),
])
def test_bad_input_names_the_field(mutate, field):
    document = copy.deepcopy(json.loads(open(EXAMPLE).read()))
    mutate(document)
    with pytest.raises(HydraulisError) as error:
        cluster_from_dict(document)
    assert error.value.field == field


def test_group_lookup_and_links():
    cluster = ClusterDescription((DeviceGroup("x", "a100-80g", 1, 8),))
    assert cluster.group("x").devices == 8
    with pytest.raises(HydraulisError, match="is not a device group"):
        cluster.group("y")
    with pytest.raises(HydraulisError, match="two different groups"):
        GroupLink("x", "x", 10.0)
