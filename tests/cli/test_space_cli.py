"""``hydraulis space``: the acceptance commands and bad input (exit 2, one line, no traceback)."""

import json

import pytest

from hydraulis.base.types import OptimizerLayout
from tests.cli.helpers import hydraulis
from tests.conftest import load_pool, pool_path
from tests.cost.test_memory import reference_max_seq_len


@pytest.mark.parametrize("name", ["7b", "13b"])
def test_import_then_show_matches_the_original_formula(name, tmp_path):
    space = tmp_path / "space.json"
    assert hydraulis("space", "import", str(pool_path(name)), "-o", str(space)).returncode == 0
    shown = hydraulis("space", "show", str(space), "--optimizer-layout", "8,4,1", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    pool = load_pool(name)
    assert len(rows) == len(pool["strategies"])
    for row in rows:
        assert {"cp", "tp", "pp", "devices", "a", "b", "c", "max_seq_len"} <= row.keys()
        expected = reference_max_seq_len(pool, row["tp"], row["pp"], OptimizerLayout(8, 4, 1))
        assert abs(row["max_seq_len"] - expected) <= max(128, 0.01 * expected)


def test_analytic_then_show_table(tmp_path):
    space = tmp_path / "a.json"
    made = hydraulis("space", "analytic", "--model", "llama-32b", "--device", "h100-80g", "--devices", "1024",
                     "-o", str(space))
    assert made.returncode == 0, made.stderr
    shown = hydraulis("space", "show", str(space), "--optimizer-layout", "128,8,1")
    assert shown.returncode == 0
    assert "model states exceed device memory" in shown.stdout
    assert shown.stdout.splitlines()[1].startswith("pipeline: forward share φ 0.333, hand-off d ")
    assert "max_seq_len" in shown.stdout.splitlines()[2]


def _bad_space(tmp_path, mutate) -> str:
    space = tmp_path / "s.json"
    hydraulis("space", "import", str(pool_path("7b")), "-o", str(space))
    document = json.loads(space.read_text())
    mutate(document)
    space.write_text(json.dumps(document))
    return str(space)


@pytest.mark.parametrize("make_args, needle", [
    (lambda t: ["space", "show", str(t / "missing.json")], "does not exist"),
    (lambda t: ["space", "show", _write(t, "{oops")], "is not valid JSON"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: d["schemes"][0].pop("a"))], "schemes[0].a"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: d["schemes"][0].__setitem__("b", -2.0))], "schemes[0].b: -2.0"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: d["schemes"][0].__setitem__("tp", 3))], "does not divide model.heads"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: d["schemes"][0].__setitem__("pp", 99))], "exceeds model.layers"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: None), "--optimizer-layout", "5,4,1"], "does not divide the 64 devices"),
    (lambda t: ["space", "show", _bad_space(t, lambda d: None), "--optimizer-layout", "8,4"], "DP,TP,PP"),
    (lambda t: ["space", "analytic", "--model", "llama-7b", "--device", "h100-80g", "--devices", "0", "-o",
                str(t / "x.json")], "--devices: '0' must be between 1 and 65536"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, make_args, needle):
    result = hydraulis(*make_args(tmp_path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_preset_is_a_usage_error():
    result = hydraulis("space", "analytic", "--model", "gpt-9", "--device", "h100-80g", "--devices", "8", "-o", "x")
    assert result.returncode == 2
    assert "model: 'gpt-9' is neither a preset" in result.stderr


@pytest.mark.parametrize("description", [
    {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
     "num_key_value_heads": 2, "intermediate_size": 1408, "vocab_size": 32000},
    {"num_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_query_groups": 2, "ffn_hidden_size": 1408,
     "gated_linear_unit": True, "padded_vocab_size": 32000},
    {"n_layers": 4, "dim": 512, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 32000, "multiple_of": 256},
])
def test_analytic_takes_a_model_description(tmp_path, description):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(description))
    space = tmp_path / "space.json"
    made = hydraulis("space", "analytic", "--model", str(folder / "config.json"), "--device", "h100-80g",
                     "--devices", "8", "-o", str(space))
    assert made.returncode == 0, made.stderr
    model = json.loads(space.read_text())["model"]
    assert (model["name"], model["layers"], model["hidden"], model["kv_heads"], model["ffn_hidden"]) == \
        ("my-model", 4, 512, 2, 1536 if "dim" in description else 1408)


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("command", [[], ["space"], ["space", "import"], ["space", "analytic"], ["space", "show"]])
def test_every_command_has_help(command):
    result = hydraulis(*command, "--help")
    assert result.returncode == 0
    assert "usage: hydraulis" in result.stdout
