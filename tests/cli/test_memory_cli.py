"""``hydraulis memory``: the acceptance command's JSON (exact keys, every rank, small routes,
states and totals beside the prediction), the table, a space and the loss options, and bad input
(exit 2, one line)."""

import json
from pathlib import Path

import pytest

from hydraulis.cli import main

KEYS = {"rank", "pipeline", "stage", "weights_bytes", "grad_bytes", "optimizer_bytes", "route_bytes",
        "activation_bytes", "workspace_bytes", "exchange_bytes", "communicator_bytes", "total_bytes", "predicted_bytes"}


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["memory", *args])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def test_acceptance_7b_json(capsys):
    code, out, _ = run(capsys, "--model", "llama-7b", "--strategy", "1,8,1x8", "--devices", "64", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert {"ranks", "classes", "tokens", "capacity_bytes", "max_total_bytes", "max_predicted_bytes"} <= set(report)
    assert report["kind"] == "memory_report" and len(report["classes"]) == 8
    ranks = report["ranks"]
    assert [r["rank"] for r in ranks] == list(range(64)) and all(set(r) == KEYS for r in ranks)
    assert {r["pipeline"] for r in ranks} == set(range(8)) and {r["stage"] for r in ranks} == {0}
    for r in ranks:
        assert r["route_bytes"] <= 16 * 2**20
        assert r["total_bytes"] == (sum(r[k] for k in ("weights_bytes", "grad_bytes", "optimizer_bytes", "route_bytes",
                                                       "workspace_bytes"))
                                    + max(r["activation_bytes"], r["exchange_bytes"]))
        assert abs(r["total_bytes"] - r["predicted_bytes"]) <= 0.1 * r["predicted_bytes"]
    assert report["max_total_bytes"] == max(r["total_bytes"] for r in ranks)


def test_table_has_one_row_per_class_and_idle_ranks(capsys):
    code, out, _ = run(capsys, "--model", "tiny", "--strategy", "1,2,2", "--devices", "8", "--tokens", "256",
                       "--optimizer-layout", "2,2,2", "--device", "cpu")
    assert code == 0
    lines = out.splitlines()
    assert "micro-batches of 256 tokens" in lines[0]
    rows = lines[3:-1]
    assert len(rows) == 6
    assert [row.split()[:3] for row in rows[-2:]] == [["4,6", "-", "-"], ["5,7", "-", "-"]]
    assert lines[-1].startswith("max_total_bytes=")


def test_stages_of_a_staged_strategy_have_their_own_tp_and_layers(capsys):
    code, out, _ = run(capsys, "--model", "llama-7b", "--strategy", "1|4:20>2:12+1,2,1", "--devices", "8",
                       "--tokens", "4096", "--format", "json")
    assert code == 0
    ranks = json.loads(out)["ranks"]
    assert [(r["pipeline"], r["stage"]) for r in ranks] == [(0, 0)] * 4 + [(0, 1)] * 2 + [(1, 0)] * 2
    assert ranks[0]["weights_bytes"] < ranks[4]["weights_bytes"]
    for r in ranks:
        assert abs(r["total_bytes"] - r["predicted_bytes"]) <= 0.02 * r["predicted_bytes"]


CLUSTER = str(Path(__file__).resolve().parents[2] / "examples" / "clusters" / "a100_h100.json")
SPACE = Path(__file__).resolve().parents[2] / "examples" / "spaces" / "tiny_cpu.json"


def test_cluster_judges_each_group_on_its_device(capsys):
    code, out, _ = run(capsys, "--model", "llama-13b", "--strategy", "1|8:16@a100>8:24@h100x2", "--cluster", CLUSTER,
                       "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["devices"] == 32 and report["tokens"] == [15716, 15716]
    assert [(g["name"], g["device"], g["fits"]) for g in report["groups"]] == [
        ("a100", "a100-80g", True), ("h100", "h100-80g", True)]
    code, out, _ = run(capsys, "--model", "llama-13b", "--strategy", "1|8:16@a100>8:24@h100x2", "--cluster", CLUSTER,
                       "--tokens", "20000")
    assert code == 0
    assert "group a100 (a100-80g, ranks 0-15)" in out and "EXCEEDS" in out


@pytest.mark.parametrize("args, field", [
    (("--model", "llama-7b", "--strategy", "1,8,1x9", "--devices", "64"), "strategy: '1,8,1x9'"),
    (("--model", "llama-8b", "--strategy", "1,8,1", "--devices", "8"), "model: 'llama-8b'"),
    (("--model", "llama-7b", "--strategy", "1,8,1", "--devices", "8", "--optimizer-layout", "3,1,1"),
     "optimizer_layout: '3,1,1'"),
    (("--model", "llama-7b", "--strategy", "1,3,1", "--devices", "8"), "strategy '1,3,1'"),
    (("--model", "llama-7b", "--strategy", "1,8,1", "--devices", "8", "--tokens", "0"), "argument --tokens: '0' must be between 1 and"),
    (("--model", "llama-7b", "--strategy", "1|4:20>2:10", "--devices", "8"), "strategy '1|4:20>2:10'"),
    (("--model", "llama-7b", "--strategy", "1|4:20>3:12", "--devices", "8"), "strategy '1|4:20>3:12'"),
    (("--model", "llama-7b", "--strategy", "1|4:20>2:12[sp]", "--devices", "8"), "strategy[0].sp"),
    (("--model", "llama-7b", "--strategy", "1|4:20>4:12x2", "--devices", "8"), "strategy: '1|4:20>4:12x2'"),
    (("--model", "llama-13b", "--strategy", "1|8:16@h100>8:24@h100x2", "--cluster", CLUSTER),
     "strategy: '1|8:16@h100>8:24@h100x2' needs 32 devices of group h100, which has 16"),
    (("--model", "llama-13b", "--strategy", "1|8:16@v100>8:24", "--cluster", CLUSTER), "group: 'v100'"),
    (("--model", "llama-13b", "--strategy", "1|8:16>8:24", "--cluster", CLUSTER, "--devices", "16"), "devices: 16"),
    (("--model", "llama-13b", "--strategy", "1,8,1"), "--devices: None is required without --cluster"),
])
def test_bad_input_exits_2_with_one_line(capsys, args, field):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("hydraulis") and f"error: {field}" in err, err


def test_a_space_given_makes_the_prediction_and_the_loss_options_the_accounting(capsys):
    base = ("--model", "tiny", "--strategy", "1,1,1", "--devices", "4", "--tokens", "512", "--device", "cpu",
            "--format", "json")
    reports = {}
    for name, extra in (("analytic", ()), ("space", ("--space", str(SPACE))), ("whole", ("--loss-chunk-tokens", "0")),
                        ("repeated", ("--repeat-kv",))):
        code, out, _ = run(capsys, *base, *extra)
        assert code == 0
        reports[name] = json.loads(out)["ranks"][0]
    assert reports["space"]["total_bytes"] == reports["analytic"]["total_bytes"]
    assert reports["space"]["predicted_bytes"] != reports["analytic"]["predicted_bytes"]
    assert reports["whole"]["activation_bytes"] > reports["analytic"]["activation_bytes"]
    assert reports["repeated"]["activation_bytes"] > reports["analytic"]["activation_bytes"]
