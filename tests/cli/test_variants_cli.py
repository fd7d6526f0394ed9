"""Spaces with variants through the commands: space analytic/show, propose, plan-step, simulate, train."""

import json

import pytest

from tests.cli.helpers import hydraulis
from tests.dispatch.helpers import EXAMPLES

LENGTHS = str(EXAMPLES / "data" / "longtail.txt")
PLAN = ("--devices", "16", "--token-budget", "65536", "--max-seq-len", "32768", "--lengths", LENGTHS, "--steps", "16",
        "--strategies", "2")


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("space") / "7b.json"
    made = hydraulis("space", "analytic", "--model", "llama-7b", "--device", "a800-80g", "--devices", "16",
                     "--cp", "1,2", "--pp", "1,2,4", "-o", str(path))
    assert made.returncode == 0, made.stderr
    assert "segments of" in made.stdout
    return str(path)


def test_show_lists_each_scheme_with_its_variants_and_their_longest_sequence(space):
    shown = hydraulis("space", "show", space, "--format", "json", "--longest", "32768")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    plain = [r for r in rows if not r["options"]]
    full = {(r["cp"], r["tp"], r["pp"]): r for r in rows if r["options"] == ["recompute=full"]}
    assert {(r["cp"], r["tp"], r["pp"]) for r in plain} == set(full)
    for row in plain:
        assert row["sp"] is False and row["recompute"] == "none" and row["recompute_layers"] == [0] * row["pp"]
        longest = full[row["cp"], row["tp"], row["pp"]]
        assert longest["recompute_layers"] == [32 // row["pp"]] * row["pp"]
        assert longest["max_seq_len"] > row["max_seq_len"] or longest["limit"] != "activation memory"
    partial = [r for r in rows if r["recompute"] == "full" and r["recompute_layers"] != [32 // r["pp"]] * r["pp"]]
    assert partial and all(r["max_seq_len"] >= 32768 for r in partial)
    none = json.loads(hydraulis("space", "show", space, "--format", "json", "--variants", "none").stdout)
    assert none == plain


def test_propose_with_and_without_variants_then_plan_a_step(space, tmp_path):
    proposals = {}
    for variants in ("none", "all"):
        out = tmp_path / f"{variants}.json"
        run = hydraulis("propose", "--space", space, *PLAN, "--variants", variants, "--explain", "-o", str(out))
        assert run.returncode == 0, run.stderr
        assert "Variants:" in run.stdout
        proposals[variants] = json.loads(out.read_text())
    assert proposals["none"]["config"]["variants"] == "none"
    schemes = [g["scheme"] for s in proposals["all"]["strategies"] for g in s["pipelines"]]
    assert any("sp" in s or "recompute" in s for s in schemes)
    assert not any("sp" in g["scheme"] or "recompute" in g["scheme"]
                   for s in proposals["none"]["strategies"] for g in s["pipelines"])
    planned = hydraulis("plan-step", "--proposal", str(tmp_path / "all.json"), "--lengths", LENGTHS, "--oversize",
                        "split", "--format", "json")
    assert planned.returncode == 0, planned.stderr


def test_simulate_composes_variants_of_an_analytic_space(tmp_path):
    run = hydraulis("simulate", "--model", "llama-7b", "--device", "a800-80g", "--devices", "16", "--token-budget",
                    "65536", "--max-seq-len", "32768", "--lengths", LENGTHS, "--steps", "2", "--planner-steps", "8",
                    "--strategies", "2", "--no-plots", "--no-progress", "-o", str(tmp_path))
    assert run.returncode == 0, run.stderr
    document = json.loads((tmp_path / "simulation.json").read_text())
    assert document["config"]["planner"]["variants"] == "all" and document["config"]["space"]["segments"] is True


@pytest.mark.distributed
def test_train_runs_a_variant_with_times_from_a_space_with_variants(tmp_path):
    space = tmp_path / "tiny.json"
    made = hydraulis("space", "analytic", "--model", "tiny", "--device", "cpu", "--devices", "2", "--cp", "1",
                     "--tp", "1,2", "--pp", "1,2", "-o", str(space))
    assert made.returncode == 0, made.stderr
    run = hydraulis("train", "--model", "tiny", "--strategy", "1,1,2[recompute=full:2/1]", "--space", str(space),
                    "--steps", "1", "--nproc", "2", "--device", "cpu", "--token-budget", "128", "--max-seq-len", "64",
                    "--output-dir", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr[-3000:]
    assert "1,1,2[recompute=full:2/1]" in run.stdout
