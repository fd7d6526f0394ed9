"""Nothing executable in a checkpoint: shard files load as tensors only, random states are JSON."""

import pickle
import random

import numpy as np
import pytest
import torch

from hydraulis.base.errors import HydraulisError
from hydraulis.job.manifest import ShardFile
from hydraulis.runtime.checkpoint.random_state import (
    encode_states,
    random_states,
    read_random_states,
    set_random_states,
)
from hydraulis.runtime.checkpoint.store import load_shard


class Payload:
    """A pickle that creates ``marker`` when unpickled by a loader that runs code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_malicious_pickle_in_a_shard_is_refused_without_running(tmp_path):
    marker = tmp_path / "payload-ran"
    torch.save({"master": Payload(str(marker))}, tmp_path / "shard-00000.pt")
    with pytest.raises(HydraulisError, match=r"shard-00000.pt' is refused: it holds objects other than tensors") as refused:
        load_shard(tmp_path, ShardFile(0, "shard-00000.pt", 4))
    assert "weights_only" not in str(refused.value)
    (tmp_path / "raw.pt").write_bytes(pickle.dumps(Payload(str(marker))))
    with pytest.raises(HydraulisError, match=r"raw.pt' is refused") as refused:
        load_shard(tmp_path, ShardFile(0, "raw.pt", 4))
    assert "weights_only" not in str(refused.value)
    assert not marker.exists()


@pytest.mark.parametrize("content", [b"", b"PK\x03\x04 half a zip", b"\xff\xfe not a torch file"])
def test_a_truncated_or_foreign_shard_is_refused_naming_it(tmp_path, content):
    (tmp_path / "shard-00000.pt").write_bytes(content)
    with pytest.raises(HydraulisError, match=r"shard-00000.pt' is refused: it is not") as refused:
        load_shard(tmp_path, ShardFile(0, "shard-00000.pt", 4))
    assert "weights_only" not in str(refused.value)


def test_a_shard_of_tensors_loads(tmp_path):
    torch.save({"master": torch.arange(4.0)}, tmp_path / "shard-00000.pt")
    assert torch.equal(load_shard(tmp_path, ShardFile(0, "shard-00000.pt", 4))["master"], torch.arange(4.0))


def test_random_states_round_trip_through_json(tmp_path):
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    path = tmp_path / "rng-00000.json"
    path.write_text(encode_states(random_states()))
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(9), np.random.seed(9), random.seed(9)
    set_random_states(read_random_states(path))
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], again[0]) and np.array_equal(expected[1], again[1]) and expected[2] == again[2]


def test_random_states_that_are_not_json_are_named(tmp_path):
    path = tmp_path / "rng-00001.json"
    path.write_bytes(pickle.dumps({"torch": 1}))
    with pytest.raises(HydraulisError, match="rng-00001.json' holds no random states"):
        read_random_states(path)
