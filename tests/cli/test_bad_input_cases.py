"""The bad inputs a new user tried (issue 19), each refused with exit status 2 and one line naming
the field, the value and the limit — as separate processes, each stopped after 10 s."""

import os
from pathlib import Path

import pytest

from hydraulis.artifacts import write_scheme_space
from tests.cli.helpers import hydraulis
from tests.conftest import imported_space

ROOT = Path(__file__).resolve().parents[2]
PROPOSAL = str(ROOT / "examples" / "proposals" / "7b_64dev.json")
LENGTHS = str(ROOT / "examples" / "data" / "longtail.txt")


@pytest.fixture(scope="module")
def space(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("space") / "space.json"
    write_scheme_space(path, imported_space("7b"))
    return str(path)


@pytest.fixture(scope="module")
def huge_lengths(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("lengths") / "huge.txt"
    path.write_text("512\n99999999999999999999999\n")
    return str(path)


def propose(**flags: str) -> list[str]:
    values = {"--space": "SPACE", "--devices": "64", "--token-budget": "200000", "--max-seq-len": "32768",
              "--lengths": LENGTHS, "-o": os.devnull, **flags}
    return ["propose", *[item for pair in values.items() for item in pair]]


CASES = [
    (propose(**{"--devices": "1000000000"}), "argument --devices: '1000000000' must be between 1 and 65536"),
    (propose(**{"--token-budget": str(10**30)}), "must be between 1 and 134217728"),
    (propose(**{"--lengths": "HUGE"}), "huge.txt:2: 99999999999999999999999 must be between 1 and 2147483647"),
    (["plan-step", "--proposal", PROPOSAL, "--lengths", "HUGE"], "huge.txt:2: 99999999999999999999999 must be"),
    (["analyze", "--lengths", "HUGE", "-o", "OUT"], "huge.txt:2: 99999999999999999999999 must be"),
    (["simulate", "--lengths", "HUGE", "--devices", "64", "-o", "OUT"], "huge.txt:2: 99999999999999999999999 must be"),
    (["serve", "--port", "-1"], "argument --port: '-1' must be between 1 and 65535"),
    (["serve", "--port", "70000"], "argument --port: '70000' must be between 1 and 65535"),
    (["serve", "--workers", "0"], "argument --workers: '0' must be between 1 and 64"),
]


@pytest.mark.parametrize("argv, words", CASES, ids=[" ".join(c[0][:1] + [w for w in c[0] if w.startswith("--")][:2])
                                                     for c in CASES])
def test_each_bad_input_is_one_line_and_exit_2(argv, words, space, huge_lengths, tmp_path):
    files = {"HUGE": huge_lengths, "OUT": str(tmp_path / "out"), "SPACE": space}
    argv = [files.get(a, a) for a in argv]
    done = hydraulis(*argv, env={**os.environ, "HYDRAULIS_API_TOKEN": ""})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_short_token_is_refused_by_serve():
    done = hydraulis("serve", "--port", "1", env={**os.environ, "HYDRAULIS_API_TOKEN": "short"})
    assert done.returncode == 2
    assert done.stderr == "hydraulis: error: HYDRAULIS_API_TOKEN: '***' must be at least 8 characters\n"
