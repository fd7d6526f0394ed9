"""docs/cli.md is the page :mod:`hydraulis.cli.reference` generates: every command, subcommand and flag."""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

from hydraulis.cli import build_parser
from hydraulis.cli.reference import REGENERATE, main, parsers, reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cli.md"
HEADING = re.compile(r"^#{2,3} `(hydraulis[a-z -]*)`$", re.MULTILINE)


def sections(text: str) -> dict[str, str]:
    """The page's text under each command's heading, by the command (``hydraulis space import``)."""
    parts = HEADING.split(text)
    return dict(zip(parts[1::2], parts[2::2]))


def test_the_committed_page_is_the_generated_one_whatever_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    page = reference()
    assert PAGE.read_text(encoding="utf-8") == page, f"docs/cli.md is stale: run {REGENERATE}"
    assert str(Path.home()) not in page and sysconfig.get_paths()["stdlib"] not in page  # nor this machine's


def test_every_command_subcommand_and_flag_is_documented_under_its_heading():
    documented = sections(PAGE.read_text(encoding="utf-8"))
    commands = [parser for parser, _ in parsers(build_parser())]
    assert {"hydraulis space import", "hydraulis data synth", "hydraulis propose"} <= {p.prog for p in commands}
    assert set(documented) == {parser.prog for parser in commands}
    for parser in commands:
        flags = [flag for action in parser._actions for flag in action.option_strings if flag not in ("-h", "--help")]
        missing = [flag for flag in flags if f"`{flag}" not in documented[parser.prog] and f", {flag}" not in
                   documented[parser.prog]]
        assert missing == [], (parser.prog, missing)


def test_help_text_is_rendered_with_ranges_and_markdown_escapes():
    propose = sections(reference())["hydraulis propose"]
    assert "- `--devices DEVICES`: devices to plan for, N (required with --space); range [1, 65536]" in propose
    assert "- `-o, --output OUTPUT` (required): proposal JSON to write" in propose
    assert "--time-limit is a safety stop" in propose  # the epilog
    assert "'Authorization: Bearer \\<token>' on /v1/\\*" in sections(reference())["hydraulis serve"]


def test_main_writes_the_page(tmp_path, capsys):
    assert main(["-o", str(tmp_path / "cli.md")]) == 0
    assert (tmp_path / "cli.md").read_text(encoding="utf-8") == reference()
    assert capsys.readouterr().out == f"wrote {tmp_path / 'cli.md'}\n"
