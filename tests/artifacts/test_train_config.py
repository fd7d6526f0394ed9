"""The training-config artifact: round trip, defaults, and errors that name the field."""

import json

import pytest

from hydraulis.artifacts import read_train_config, train_config_from_dict, train_config_to_dict, write_train_config
from hydraulis.base.errors import HydraulisError
from hydraulis.base.types import BatchingMethod, OptimizerLayout
from hydraulis.job.config import RuntimeOptions, TrainConfig
from hydraulis.sharding.kinds import DeviceKind, OptimizerKind, Precision


def test_round_trip(tmp_path):
    config = TrainConfig("tiny", ("1,2,1+1,1,2", "1,1,2x2"), 5, token_budget=512, nproc=4, lengths_file="l.txt",
                         method=BatchingMethod.FIXED_PACKING, optimizer_layout=OptimizerLayout(2, 1, 2),
                         checkpoint_dir="ck", checkpoint_every=2, resume="ck", planner_url="http://h:1",
                         runtime=RuntimeOptions(DeviceKind.CPU, Precision.BF16, OptimizerKind.SGD, 0.5, 3, 20.0, 2))
    write_train_config(tmp_path / "c.json", config)
    assert read_train_config(tmp_path / "c.json") == config
    saved = json.loads((tmp_path / "c.json").read_text())
    assert saved["runtime"]["precision"] == "bf16" and saved["method"] == "fixed_packing"
    proposal = TrainConfig("tiny", (), 3, proposal_file="p.json", corpus="c.jsonl", tokenizer="t.json",
                           cluster_file="cluster.json")
    write_train_config(tmp_path / "p.json", proposal)
    assert read_train_config(tmp_path / "p.json") == proposal


def test_only_model_strategies_and_steps_are_required():
    config = train_config_from_dict({"schema_version": 1, "kind": "train_config", "model": "tiny",
                                     "strategies": ["1,1,1"], "steps": 2})
    assert config == TrainConfig("tiny", ("1,1,1",), 2)
    assert train_config_from_dict(train_config_to_dict(config)) == config


@pytest.mark.parametrize("change, field", [
    ({"steps": 0}, "steps"),
    ({"strategies": "1,1,1"}, "strategies"),
    ({"runtime": {"optimizer": "lbfgs"}}, "runtime.optimizer"),
    ({"runtime": {"lr": -1}}, "runtime.lr"),
    ({"token_budget": 8, "max_seq_len": 64}, "token_budget"),
    ({"method": "greedy"}, "method"),
    ({"optimizer_layout": {"dp": 0, "tp": 1, "pp": 1}}, "optimizer_layout.dp"),
    ({"strategies": [], "proposal_file": None}, "strategies"),
    ({"kind": "proposal"}, "kind"),
])
def test_bad_fields_are_named(change, field):
    document = {"schema_version": 1, "kind": "train_config", "model": "tiny", "strategies": ["1,1,1"], "steps": 2}
    with pytest.raises(HydraulisError) as error:
        train_config_from_dict({**document, **change})
    assert error.value.field == field
