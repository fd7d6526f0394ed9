"""``hydraulis space analytic --cluster`` and ``space show --cluster``; bad clusters exit 2 naming the field."""

import json

from tests.cli.helpers import hydraulis

EXAMPLE = "examples/clusters/a100_h100.json"


def test_analytic_writes_one_space_per_group_and_show_lists_them(tmp_path):
    made = hydraulis("space", "analytic", "--cluster", EXAMPLE, "--model", "llama-13b", "-o", str(tmp_path / "s"))
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["a100.json", "h100.json"]
    shown = hydraulis("space", "show", "--cluster", EXAMPLE, "--spaces", str(tmp_path / "s"), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    groups = json.loads(shown.stdout)["groups"]
    assert [(g["name"], g["device"], g["devices"]) for g in groups] == [("a100", "a100-80g", 16), ("h100", "h100-80g", 16)]
    assert all(g["schemes"] > 0 and g["max_seq_len"] > 0 for g in groups)


def test_unknown_preset_exits_2_naming_the_field(tmp_path):
    document = json.loads(open(EXAMPLE).read())
    document["groups"][1]["device"] = "h800"
    bad = tmp_path / "c.json"
    bad.write_text(json.dumps(document))
    run = hydraulis("space", "show", "--cluster", str(bad), "--model", "llama-13b")
    assert run.returncode == 2 and "groups[1].device" in run.stderr and "Traceback" not in run.stderr
