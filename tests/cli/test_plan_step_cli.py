"""``hydraulis plan-step``: one batch (table, JSON, plan file, Gantt chart), the method summary,
and bad input (exit 2, one line, no traceback)."""

import json

import pytest

from hydraulis.artifacts import read_lengths, read_step_plan, write_proposal
from hydraulis.artifacts.assignments import assignments_schema, assignments_to_dict, read_assignments
from hydraulis.base.types import BatchingMethod
from tests.artifacts.schema_check import violations
from tests.cli.helpers import hydraulis
from tests.dispatch.helpers import EXAMPLES, group, proposal

PROPOSAL = str(EXAMPLES / "proposals" / "7b_32dev.json")
POOL = str(EXAMPLES / "data" / "longtail.txt")


@pytest.fixture()
def batch(tmp_path):
    path = tmp_path / "batch.txt"
    path.write_text("".join(f"{n}\n" for n in read_lengths(POOL)[:120]))
    return str(path)


def test_one_batch_as_table_with_plan_file_and_gantt(batch, tmp_path):
    plan_path, png = tmp_path / "plan.json", tmp_path / "gantt.png"
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, "-o", str(plan_path),
                    "--gantt", str(png), "--alignment", "8")
    assert run.returncode == 0, run.stderr
    assert "lower bound" in run.stdout and "micro_batches" in run.stdout
    plan = read_step_plan(plan_path)
    assert plan.alignment == 8 and plan.method is BatchingMethod.DISPATCH_BALANCED_PACKING
    assert sorted(s for p in plan.pipelines for mb in p.micro_batches for s in mb.sequences) == list(range(120))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_one_batch_as_json_has_the_names_scripts_rely_on(batch):
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, "--format", "json",
                    "--method", "fixed_packing")
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert {"schema_version", "strategy_index", "method", "predicted_ms", "lower_bound_ms", "planning_ms",
            "pipelines"} <= plan.keys()
    assert plan["method"] == "fixed_packing"
    pipeline = plan["pipelines"][0]
    assert {"scheme", "max_seq_len", "predicted_ms", "micro_batches", "solver_status"} <= pipeline.keys()
    assert set(pipeline["scheme"]) == {"cp", "tp", "pp"}
    assert {"sequences", "tokens", "cu_seqlens"} <= pipeline["micro_batches"][0].keys()


@pytest.mark.parametrize("method", ["padding", "dispatch_balanced_packing"])
def test_gantt_of_many_stage_pipelines(tmp_path, method):
    staged = tmp_path / "staged.json"
    write_proposal(staged, proposal((group(pp=4, count=2, capacity=8000, a=1e-6, b=0.05, c=10.0),)))
    lengths = tmp_path / "short.txt"
    lengths.write_text("".join(f"{n}\n" for n in [3000, 2500, 2000, 1500, 1200, 900, 800, 500, 400, 300] * 4))
    png = tmp_path / "g.png"
    run = hydraulis("plan-step", "--proposal", str(staged), "--lengths", str(lengths), "--gantt", str(png),
                    "--method", method)
    assert run.returncode == 0, run.stderr
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_summary_of_all_methods_over_sampled_steps():
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", POOL, "--steps", "4",
                    "--token-budget", "200000", "--format", "json")
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)
    assert [r["method"] for r in rows] == [m.value for m in BatchingMethod] + [
        "dispatch_balanced_packing+synthesis(proposal)"]
    assert all(r["steps"] == 4 and r["median_ratio"] >= 1.0 for r in rows)
    assert rows[-1]["mean_ms"] <= rows[-2]["mean_ms"] and sum(rows[-1]["chosen"]) + rows[-1]["synthesised"] == 4
    table = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", POOL, "--steps", "3",
                      "--token-budget", "200000")
    assert table.returncode == 0 and "speedup_vs_fixed" in table.stdout and "dispatch_balanced_packing" in table.stdout


@pytest.mark.parametrize("extra, message", [
    (["--method", "greedy"], "invalid choice"),
    (["--time-limit", "-1"], "--time-limit: '-1' must be between 0 and 3600"),
    (["--alignment", "0"], "--alignment: '0' must be between 1 and 65536"),
    (["--ilp-nodes", "-1"], "--ilp-nodes: '-1' must be between 0 and 10000000"),
    (["--token-budget", "100"], "--token-budget: 100 needs --steps"),
    (["--steps", "2"], "--token-budget: None is required with --steps"),
    (["--steps", "0", "--token-budget", "200000"], "--steps: '0' must be between 1 and 100000"),
    (["--steps", "2", "--token-budget", "200000", "--gantt", "x.png"], "leave out --steps"),
    (["--synthesise", "space"], "synthesise: 'space' needs the scheme space: give --space"),
    (["--synthesis-evaluations", "-1"], "--synthesis-evaluations: '-1' must be between 0 and 1000"),
    (["--steps", "2", "--token-budget", "200000", "--format", "assignments"],
     "--format: 'assignments' lists one batch's ranks; leave out --steps"),
    (["--format", "ranks"], "invalid choice"),
    (["--single-strategy"], "--single-strategy: True needs --format assignments"),
    (["--format", "assignments", "--single-strategy", "--synthesise", "off"], "leave it out with --single-strategy"),
    (["--format", "assignments", "--explain"], "--explain: True writes, draws or explains a step plan"),
])
def test_bad_arguments(batch, extra, message):
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, *extra)
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("content, message", [
    ("", "holds no lengths"),
    ("10\n0\n", "must be between 1 and"),
    ("10\n-5\n", "must be between 1 and"),
    ("10\n99999999\n", "exceeds the longest sequence any pipeline of the proposal can hold"),
])
def test_bad_batches(tmp_path, content, message):
    lengths = tmp_path / "bad.txt"
    lengths.write_text(content)
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", str(lengths))
    assert run.returncode == 2 and message in run.stderr and "Traceback" not in run.stderr


def test_oversize_split_from_the_command_line(tmp_path):
    lengths = tmp_path / "long.txt"
    lengths.write_text("300000\n10\n")
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", str(lengths), "--oversize", "split",
                    "--format", "json")
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    pieces = [n for p in plan["pipelines"] for mb in p["micro_batches"] for s, n in zip(mb["sequences"], mb["lengths"])
              if s == 0]
    assert sum(pieces) == 300000 and len(pieces) > 1


def test_assignments_round_trip_through_their_reader(batch, tmp_path):
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, "--format", "assignments")
    assert run.returncode == 0, run.stderr
    path = tmp_path / "assignments.json"
    path.write_text(run.stdout)
    step = read_assignments(path)
    assert assignments_to_dict(step) == json.loads(run.stdout)
    assert violations(json.loads(run.stdout), assignments_schema()) == []
    assignments = step.assignments
    assert assignments.devices == 32 and len(assignments.ranks) <= 32
    assert assignments.lengths == tuple(int(n) for n in read_lengths(batch))
    assert step.ids == tuple(range(120))
    heads = {r.pipeline: r.micro_batches for r in assignments.ranks}
    assert sorted(i for mbs in heads.values() for mb in mbs for i in mb) == list(range(120))
    for r in assignments.ranks:
        assert r.micro_batches == heads[r.pipeline]


def _samples(tmp_path, steps: int, suffix: str) -> tuple[str, list[dict]]:
    lengths = read_lengths(POOL)[:40 * steps].tolist()
    rows = [{"step": k // 40, "id": f"doc-{k}", "length": n} for k, n in enumerate(lengths)]
    path = tmp_path / f"samples{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text("".join(f"{r['step']}\t{r['id']}\t{r['length']}\n" for r in rows))
    return str(path), rows


@pytest.mark.parametrize("suffix", [".jsonl", ".tsv"])
def test_assignments_of_several_steps_carry_the_ids_as_json_lines(tmp_path, suffix):
    path, rows = _samples(tmp_path, 3, suffix)
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", path, "--format", "assignments")
    assert run.returncode == 0, run.stderr
    documents = [json.loads(line) for line in run.stdout.splitlines()]
    assert [d["step"] for d in documents] == [0, 1, 2]
    for k, document in enumerate(documents):
        assert violations(document, assignments_schema()) == []
        ours = [r for r in rows if r["step"] == k]
        assert document["samples"] == [{"id": r["id"], "length": r["length"]} for r in ours]
        heads = {r["pipeline"]: r["micro_batches"] for r in document["ranks"]}
        assert sorted(i for mbs in heads.values() for mb in mbs for i in mb) == sorted(r["id"] for r in ours)
        assert all(r["predicted_ms"] <= document["predicted_ms"] for r in document["ranks"])
        assert all(r["layers"][0] < r["layers"][1] for r in document["ranks"])


def test_single_strategy_runs_every_step_on_one_strategy(tmp_path):
    path, _ = _samples(tmp_path, 3, ".jsonl")
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", path, "--format", "assignments",
                    "--single-strategy")
    assert run.returncode == 0, run.stderr
    strategies = {json.dumps(json.loads(line)["strategy"]) for line in run.stdout.splitlines()}
    assert len(strategies) == 1 and json.loads(strategies.pop())["index"] is not None


def test_assignments_refuse_split_sequences(tmp_path):
    lengths = tmp_path / "long.txt"
    lengths.write_text("300000\n10\n")
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", str(lengths), "--oversize", "split",
                    "--format", "assignments")
    assert run.returncode == 2 and "oversize: 'split' cut sequences into pieces" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_proposal_that_fails_validation(tmp_path):
    document = json.loads(open(PROPOSAL).read())
    document["strategies"][0]["pipelines"][0]["count"] = 100
    document["strategies"][0]["devices"] = 1600
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(document))
    run = hydraulis("plan-step", "--proposal", str(broken), "--lengths", POOL)
    assert run.returncode == 2 and "strategies[0].devices: 1600 exceeds the proposal's 32 devices" in run.stderr


def test_explain_gives_the_bounds_and_the_gap_and_off_keeps_the_proposal(batch):
    run = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, "--explain")
    assert run.returncode == 0, run.stderr
    assert "pool" in run.stdout and "tight" in run.stdout and "note: synthesis:" in run.stdout
    gap = next(line for line in run.stdout.splitlines() if line.startswith("gap: predicted"))
    total = float(gap.split()[2])
    terms = [float(part.split()[-1]) for part in gap.split(" = ", 1)[1].split(" + ")]
    assert [part.rsplit(" ", 1)[0] for part in gap.split(" = ", 1)[1].split(" + ")] == [
        "work", "strategy set", "off cheapest", "fixed", "imbalance", "bubbles", "reduction", "switch"]
    assert sum(terms) == pytest.approx(total, abs=0.5)
    level = next(line for line in run.stdout.splitlines() if line.startswith("any plan at this plan's reduction"))
    least, compute = float(level.split("in at least ")[1].split()[0]), float(level.split("compute part ")[1].split()[0])
    assert 0 < least <= compute
    off = hydraulis("plan-step", "--proposal", PROPOSAL, "--lengths", batch, "--synthesise", "off", "--format", "json")
    assert off.returncode == 0 and json.loads(off.stdout)["synthesis"] is None
