"""The checkpoint manifest and the training log: round trips and errors that name the field;
finding the newest complete checkpoint, never a partial one."""

import pytest

from hydraulis.artifacts.checkpoint import (
    checkpoint_manifest_from_dict,
    checkpoint_manifest_to_dict,
    read_checkpoint_manifest,
    write_checkpoint_manifest,
)
from hydraulis.artifacts.train_log import read_train_log, write_train_log
from hydraulis.base.errors import HydraulisError
from hydraulis.base.presets import model_preset
from hydraulis.base.types import OptimizerLayout
from hydraulis.cost.pipeline import Phase, ScheduledOp
from hydraulis.data.loader import LoaderConfig, LoaderPosition
from hydraulis.job.manifest import MANIFEST_FILE, CheckpointManifest, ShardFile
from hydraulis.job.records import PipelineOperations, StepRecord
from hydraulis.runtime.checkpoint.resume import find_checkpoint, latest_checkpoint
from hydraulis.sharding.kinds import OptimizerKind

MANIFEST = CheckpointManifest(3, model_preset("tiny"), OptimizerLayout(2, 1, 1), 4, OptimizerKind.ADAM, 1e-3, 3,
                              "synthetic", LoaderConfig(256, 64, 0), LoaderPosition(0, 3),
                              (ShardFile(0, "shard-00000.pt", 10), ShardFile(1, "shard-00001.pt", 10)), "now", "0.1")


def test_manifest_round_trip(tmp_path):
    write_checkpoint_manifest(tmp_path / MANIFEST_FILE, MANIFEST)
    assert read_checkpoint_manifest(tmp_path / MANIFEST_FILE) == MANIFEST


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(step=-1), "step"),
    (lambda d: d["optimizer"].update(kind="lbfgs"), "optimizer.kind"),
    (lambda d: d.update(shards=d["shards"][:1]), "shards"),
    (lambda d: d["position"].update(batch=-1), "position.batch"),
    (lambda d: d["optimizer_layout"].update(dp=3), "optimizer_layout"),
    (lambda d: d.update(schema_version=9), "schema_version"),
])
def test_bad_manifests_name_the_field(change, field):
    document = checkpoint_manifest_to_dict(MANIFEST)
    change(document)
    with pytest.raises(HydraulisError) as error:
        checkpoint_manifest_from_dict(document)
    assert error.value.field == field


def test_the_newest_complete_checkpoint_is_found_and_partial_ones_are_not(tmp_path):
    assert latest_checkpoint(tmp_path / "missing") is None
    for name in ("step-00000002", "step-00000010", "step-00000012.partial", "step-00000011"):
        (tmp_path / name).mkdir()
    for name in ("step-00000002", "step-00000010", "step-00000012.partial"):
        write_checkpoint_manifest(tmp_path / name / MANIFEST_FILE, MANIFEST)
    assert latest_checkpoint(tmp_path).name == "step-00000010"
    assert find_checkpoint(tmp_path / "step-00000002").folder.name == "step-00000002"
    with pytest.raises(HydraulisError, match="no complete checkpoint"):
        find_checkpoint(tmp_path / "step-00000011")


def test_train_log_round_trip(tmp_path):
    records = (StepRecord(0, "1,1,1x4", 200, 6.9, (90.0, 80.0), (70.0, 70.0), 1.0, 9.0, 100.0, 80.0, 1.0, 0.5),)
    write_train_log(tmp_path / "log.json", records)
    assert read_train_log(tmp_path / "log.json") == records
    assert "operations" not in (tmp_path / "log.json").read_text()


def test_recorded_operations_round_trip(tmp_path):
    ops = (ScheduledOp(0, 0, Phase.FORWARD, 0.0, 1.5), ScheduledOp(0, 0, Phase.BACKWARD, 1.5, 4.5),
           ScheduledOp(1, 0, Phase.FORWARD, 1.6, 3.0))
    operations = (PipelineOperations(0, (4.5,), ops),)
    records = (StepRecord(0, "1,1,2", 20, 6.9, (9.0,), (7.0,), 1.0, 9.0, 10.0, 8.0, 1.0, operations=operations),)
    write_train_log(tmp_path / "log.json", records)
    assert read_train_log(tmp_path / "log.json") == records
    assert operations[0].stage_order(0) == [("F", 0), ("B", 0)]
