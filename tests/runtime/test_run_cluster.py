"""A training run on a mixed cluster: one process per device, every strategy placed on the groups."""

import json

import pytest

from hydraulis.base.errors import HydraulisError
from hydraulis.job.config import TrainConfig
from hydraulis.runtime.run import resolve_run

TWO_GROUPS = {"schema_version": 1, "kind": "cluster",
              "groups": [{"name": "x", "device": "cpu", "nodes": 1, "devices_per_node": 2},
                         {"name": "y", "device": "cpu", "nodes": 1, "devices_per_node": 2}],
              "links": [{"groups": ["x", "y"], "gbps": 10.0}]}


@pytest.fixture
def cluster(tmp_path):
    path = tmp_path / "two_groups.json"
    path.write_text(json.dumps(TWO_GROUPS))
    return str(path)


def test_a_run_on_a_cluster_takes_one_process_per_device(cluster):
    run = resolve_run(TrainConfig("tiny", ("1|2:2@y>1:2@x",), 1, cluster_file=cluster))
    assert run.devices == 4 and [g.start for g in run.cluster.rank_ranges()] == [0, 2]


@pytest.mark.parametrize("spec, nproc, message", [
    ("1|2:2@y>1:2@x", 5, "nproc: 5 must be the cluster's 4 devices"),
    ("1|2:2@y>2:2@y", 0, "strategy: '1|2:2@y>2:2@y' needs 4 devices of group y, which has 2"),
    ("1|2:2@z>1:2", 0, "group: 'z' is not a device group of the cluster (x, y)"),
])
def test_a_strategy_or_a_world_the_cluster_cannot_hold_is_refused(cluster, spec, nproc, message):
    with pytest.raises(HydraulisError) as error:
        resolve_run(TrainConfig("tiny", (spec,), 1, nproc=nproc, cluster_file=cluster))
    assert message in str(error.value)
