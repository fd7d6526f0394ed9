"""No traceback, ever: every command of ``hydraulis`` — found by walking the argparse tree, so a
command added later is fuzzed too — runs with argument vectors built from its own argument
definitions, at least one of them bad (a number outside its limit, a malformed list, a hostile
input file, an unusable output path, an unknown choice), and must end with exit status 0 or 2,
one line of error and no traceback.

Input files are hostile in the ways a user's files are: empty, binary, huge integers, NaN,
negative values, JSON of the wrong shape, and valid documents with one value replaced by a
hostile one. In-process (``hydraulis.cli.main``), bounded and derandomized.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hydraulis.artifacts import scheme_space_to_dict, train_config_to_dict
from hydraulis.cli import build_parser, main
from hydraulis.cli.arguments import Bounded, BoundedList, FileKind, InputFile, OutputPath
from hydraulis.job.config import TrainConfig
from tests.conftest import imported_space, load_pool

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 40
NAMES = itertools.count()


@dataclass(frozen=True)
class Command:
    path: tuple[str, ...]
    parser: argparse.ArgumentParser

    def __str__(self) -> str:
        return " ".join(self.path)


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[Command]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += leaf_commands(sub, (*path, name))
    return found or [Command(path, parser)]


COMMANDS = leaf_commands(build_parser())


def arguments(command: Command) -> list[argparse.Action]:
    return [a for a in command.parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction))]


# values --------------------------------------------------------------------------------------

def bad_numbers(limit) -> st.SearchStrategy[str]:
    edges = [limit.minimum - 1, limit.maximum + 1, limit.maximum * 10**6]
    if not limit.integer:
        edges += [limit.minimum - 1e-9, limit.maximum * (1 + 1e-9)]
    texts = [repr(int(v)) if limit.integer else repr(float(v)) for v in edges]
    texts += ["nan", "inf", "-inf", "1e400", "99999999999999999999999", "-99999999999999999999999", "x", "",
              "0x10", "1,5", "9" * 5000]
    if limit.integer:
        texts.append("1.5")
    if limit.exclusive_minimum:
        texts.append(repr(limit.minimum))
    return st.sampled_from(texts)


def good_numbers(limit) -> st.SearchStrategy[str]:
    low = limit.minimum + (1 if limit.integer else 0.5) * limit.exclusive_minimum
    values = {low, min(limit.maximum, max(low, 8 if limit.integer else 1.0))}
    return st.sampled_from(sorted(str(int(v)) if limit.integer else repr(float(v)) for v in values))


BAD_LISTS = st.sampled_from(["", ",", "0", "-1", "1,x", "1," * 100, "99999999999999999999999", "nan", "1;2"])
TEXTS = st.sampled_from(["", "-", "x" * 300, "--", "ü", "a b", "bundled:99"])

JSON_SHAPES = ["[]", "{}", "5", '"x"', "null", '{"kind": 1}', "1e999", "NaN", "[1, 2, 3]",
               '{"schema_version": 99999999999999999999}']
HOSTILE_LEAVES = [None, -1, 0, 10**30, -(10**30), 1e308, float("nan"), float("inf"), "x", [], {}, True, 2**63,
                  1.5, "NaN"]
LENGTH_TEXTS = ["", "\x00\x01\x02\xff\xfe", "99999999999999999999999\n", "nan\n", "-5\n", "0\n", "1.5\n",
                "1e9\n", "12\nabc\n", "[1, 2]", "\n\n# only comments\n", "2147483648\n"]


def leaves(document, path=()):
    if isinstance(document, dict):
        for key, value in document.items():
            yield from leaves(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from leaves(value, (*path, index))
    yield path


def replaced(document, path, value):
    if not path:
        return value
    copy = list(document) if isinstance(document, list) else dict(document)
    copy[path[0]] = replaced(document[path[0]], path[1:], value)
    return copy


@pytest.fixture(scope="module")
def documents() -> dict[FileKind, object]:
    proposal = json.loads((ROOT / "examples" / "proposals" / "7b_32dev.json").read_text())
    config = train_config_to_dict(TrainConfig("tiny", ("1,1,1",), 2))
    return {FileKind.SCHEME_SPACE: scheme_space_to_dict(imported_space("7b", 32)), FileKind.PROPOSAL: proposal,
            FileKind.POOL: load_pool("7b"), FileKind.TRAIN_CONFIG: config,
            FileKind.TOKENIZER: {"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}}


@st.composite
def hostile_file(draw, kind: FileKind, folder: Path, documents: dict) -> str:
    """A path to hostile contents for a file of ``kind``."""
    path = folder / f"input-{next(NAMES)}{'.txt' if kind is FileKind.LENGTHS else '.json'}"
    way = draw(st.sampled_from(["missing", "directory", "empty", "binary", "shape", "mutated", "lengths"]))
    if way == "missing":
        return str(folder / "does-not-exist" / path.name)
    if way == "directory":
        path.mkdir()
        return str(path)
    if way == "empty":
        path.write_bytes(b"")
    elif way == "binary":
        path.write_bytes(bytes(draw(st.lists(st.integers(0, 255), min_size=1, max_size=64))) + b"\xff\xfe\x00")
    elif way == "lengths" or (way == "mutated" and kind not in documents):
        path.write_text(draw(st.sampled_from(LENGTH_TEXTS)), encoding="utf-8", errors="surrogateescape")
    elif way == "shape":
        path.write_text(draw(st.sampled_from(JSON_SHAPES)))
    else:
        document = documents[kind]
        where = draw(st.sampled_from(list(leaves(document))))
        path.write_text(json.dumps(replaced(document, where, draw(st.sampled_from(HOSTILE_LEAVES)))))
    return str(path)


@st.composite
def bad_output(draw, folder: Path) -> str:
    blocker = folder / "a-file"
    blocker.write_text("x")
    return draw(st.sampled_from([str(blocker / "below" / "out.json"), str(folder / "\x00bad"), ""]))


def poisonable(action: argparse.Action) -> bool:
    return isinstance(action.type, (Bounded, BoundedList, InputFile, OutputPath)) or bool(action.choices)


@st.composite
def argument_vector(draw, command: Command, folder: Path, documents: dict) -> list[str]:
    """The command's arguments: every required one, some optional ones, and one poisoned."""
    actions = arguments(command)
    candidates = [a for a in actions if poisonable(a)]
    assert candidates, f"{command} has no argument the fuzz test can make bad"
    poison = draw(st.sampled_from(candidates))
    chosen = [a for a in actions if a.required or a is poison or draw(st.booleans())]
    groups = {}
    for group in command.parser._mutually_exclusive_groups:
        for action in group._group_actions:
            groups[action] = group
    seen_groups, argv, positionals = set(), [], []
    for action in chosen:
        group = groups.get(action)
        if group is not None and action is not poison:
            if group in seen_groups or poison in group._group_actions:
                continue
        if group is not None:
            seen_groups.add(group)
        if action.nargs == 0:
            argv.append(action.option_strings[0])
            continue
        value = draw(value_of(action, action is poison, folder, documents))
        if action.option_strings:
            argv += [action.option_strings[-1], value] if not value.startswith("-") else [
                f"{action.option_strings[-1]}={value}"]
        else:
            positionals.append(value)
    return argv + (["--", *positionals] if positionals else [])


def value_of(action: argparse.Action, bad: bool, folder: Path, documents: dict) -> st.SearchStrategy[str]:
    kind = action.type
    if isinstance(kind, Bounded):
        return bad_numbers(kind.limit) if bad else good_numbers(kind.limit)
    if isinstance(kind, BoundedList):
        return BAD_LISTS if bad else st.just("1,2")
    if isinstance(kind, InputFile):
        return hostile_file(kind.kind, folder, documents)
    if isinstance(kind, OutputPath):
        return bad_output(folder) if bad else st.just(str(folder / f"out-{action.dest}"))
    if action.choices:
        return st.just("no-such-choice") if bad else st.sampled_from([str(c) for c in action.choices])
    return TEXTS


def run(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 2
    return status, out.getvalue() + err.getvalue()


def test_every_numeric_argument_has_a_limit():
    loose = [f"{command} {action.option_strings or action.dest}" for command in COMMANDS
             for action in arguments(command) if action.type in (int, float)]
    assert loose == [], "use hydraulis.cli.arguments.Bounded with a limit of hydraulis.base.limits"


@pytest.mark.parametrize("command", COMMANDS, ids=str)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_bad_input_exits_2_with_one_line_and_no_traceback(command, documents, data):
    with tempfile.TemporaryDirectory() as folder:
        argv = [*command.path, *data.draw(argument_vector(command, Path(folder), documents), label="argv")]
        status, output = run(argv)
    assert "Traceback" not in output, output
    assert status in (0, 2), output
    if status == 2:
        errors = [line for line in output.splitlines() if "error" in line]
        assert len(errors) == 1 and len(errors[0]) < 600, output
