"""``hydraulis propose``: the table, the artifact's names, the saved config; bad input exits 2."""

import json

import pytest

from hydraulis.artifacts import read_proposal, read_scheme_space
from tests.cli.helpers import hydraulis
from tests.conftest import pool_path
from tests.planner.instances import LENGTHS


@pytest.fixture(scope="module")
def space(tmp_path_factory):
    path = tmp_path_factory.mktemp("space") / "space_7b.json"
    assert hydraulis("space", "import", str(pool_path("7b")), "-o", str(path)).returncode == 0
    return str(path)


def propose_args(space, output, lengths=str(LENGTHS), **overrides):
    values = {"--devices": "32", "--token-budget": "65536", "--max-seq-len": "32768", "--strategies": "3",
              "--steps": "16", **overrides}
    return ["propose", "--space", space, "--lengths", lengths, "-o", str(output),
            *[item for pair in values.items() for item in pair]]


def test_propose_prints_a_table_and_writes_the_artifact(space, tmp_path):
    done = hydraulis(*propose_args(space, tmp_path / "p.json"), "--explain")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["strategy", "serves", "pipelines", "devices", "max_seq_len", "predicted_ms",
                                "reduce_ms", "headroom_GiB"]
    assert "ratio" in done.stdout and lines[-1].startswith(f"wrote {tmp_path / 'p.json'}: ")
    assert " s wall (planner " in lines[-1]
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["schema_version"] == 1 and document["devices"] == 32
    assert set(document["optimizer_layout"]) == {"dp", "tp", "pp"}
    for strategy in document["strategies"]:
        assert {"pipelines", "devices", "predicted_ms"} <= set(strategy)
        for pipeline in strategy["pipelines"]:
            assert set(pipeline["scheme"]) == {"cp", "tp", "pp"} and {"count", "max_seq_len"} <= set(pipeline)
    assert document["config"]["devices_per_node"] == 8 and document["config"]["lengths"] == str(LENGTHS)
    assert document["config"]["solver"] == "cbc" and document["config"]["strategies"] == 3
    read_proposal(tmp_path / "p.json", read_scheme_space(space))


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_the_loss_chunk_the_memory_is_priced_with_is_recorded(space, tmp_path):
    done = hydraulis(*propose_args(space, tmp_path / "p.json", **{"--loss-chunk-tokens": "512"}))
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["loss_chunk_tokens"] == 512 == document["config"]["loss_chunk_tokens"]
    assert read_proposal(tmp_path / "p.json").loss_chunk_tokens == 512


@pytest.mark.parametrize("make, needle", [
    (lambda s, t: propose_args(s, t / "o.json", **{"--devices": "1"}),
     "devices: 1 is smaller than every scheme of the space"),
    (lambda s, t: propose_args(s, t / "o.json", **{"--max-seq-len": "300000", "--token-budget": "400000"}),
     "max_seq_len: 300000 exceeds the longest sequence any scheme can hold"),
    (lambda s, t: propose_args(s, t / "o.json", lengths=_write(t, "empty.txt", "# nothing\n")), "holds no lengths"),
    (lambda s, t: propose_args(s, t / "o.json", lengths=_write(t, "words.txt", "12\nabc\n")),
     "words.txt:2: 'abc' is not an integer"),
    (lambda s, t: propose_args(s, t / "o.json", lengths=_write(t, "neg.txt", "12\n-4\n")),
     "neg.txt:2: -4 must be between 1 and"),
    (lambda s, t: propose_args(s, t / "o.json", **{"--strategies": "0"}), "--strategies: '0' must be between 1 and 64"),
])
def test_bad_input_exits_2_with_one_line(space, tmp_path, make, needle):
    done = hydraulis(*make(space, tmp_path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and needle in done.stderr, done.stderr
    assert not (tmp_path / "o.json").exists()
