"""``docs/cli.md``, the command reference, generated from the parser of :func:`hydraulis.cli.build_parser`.

Every command and subcommand (``space import``, ``data synth``, …) is rendered with its usage,
its description, each option with its help text (the range of a bounded number included, as
``--help`` shows it) and its epilog; the limits of every number close the page, from
:data:`hydraulis.base.limits.LIMITS`. Nothing in ``docs/cli.md`` is written by hand: a command's
explanation belongs in its ``description=``/``epilog=`` or its options' ``help=``. After a flag
is added or changed, regenerate the page with::

    python -m hydraulis.cli.reference -o docs/cli.md

``tests/cli/test_reference.py`` fails while the committed page differs from the generated one.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence

from hydraulis.base.files import write_text_atomically
from hydraulis.base.limits import LIMITS, SEQUENCES
from hydraulis.cli import build_parser
from hydraulis.cli.arguments import OutputPath, help_with_range
from hydraulis.cli.output import emit

REGENERATE = "python -m hydraulis.cli.reference -o docs/cli.md"
"""The command that writes ``docs/cli.md``."""

USAGE_WIDTH = 100
"""Columns of the usage blocks, fixed so that the page does not depend on the terminal."""

PREAMBLE = f"""\
# Command reference

<!-- Generated from the argparse definitions by `{REGENERATE}`; do not edit by hand. -->

Every command has `--help`, which prints what this page shows for it. Bad input exits with
status 2 and one line naming the field, the value and the limit; an unexpected failure exits
with status 1 and one line (its traceback goes to the log at `--log-level debug`). Numbers are
checked against their [limits](#limits). How the commands fit together: [README](../README.md)'s
quick tour and [the guide](guide.md); why they work as they do: [the design](design.md).
"""

LIMITS_TEXT = f"""\
## Limits

Every number the CLI, the files and the service accept has one range (`hydraulis/base/limits.py`,
design §15; each command's `--help` shows it). Outside it: exit status 2 or HTTP 422, with one
line naming the field, the value and the range. At most `SEQUENCES` ({SEQUENCES.what}) are held at
once: documents cut to the maximum length, or the (steps + 1) × sequences per step drawn for
sampled steps.

| limit | what | range |
|---|---|---|
"""

_MARKDOWN_SPECIAL = re.compile(r"([\\<*])")


def reference() -> str:
    """The whole page: preamble, the root command, every subcommand in registration order, limits."""
    sections = [PREAMBLE] + [_section(parser, help_text) for parser, help_text in parsers(build_parser())]
    rows = "".join(f"| `{name}` | {limit.what} | {limit.interval} |\n" for name, limit in LIMITS.items())
    return "\n".join(sections + [LIMITS_TEXT + rows])


def parsers(parser: argparse.ArgumentParser, help_text: str = "") -> Iterator[tuple[argparse.ArgumentParser, str]]:
    """``parser`` and, depth first, every subcommand's parser, each with its one-line help."""
    yield parser, help_text
    for action in _subcommands(parser):
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, subparser in action.choices.items():
            yield from parsers(subparser, helps.get(name, ""))


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse._SubParsersAction]:
    return [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]


def _section(parser: argparse.ArgumentParser, help_text: str) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    depth = max(parser.prog.count(" "), 1)  # the root and the commands ##, their subcommands ###
    lines = [f"{'#' * (depth + 1)} `{parser.prog}`", "", "```text", formatter.format_help().strip(), "```", ""]
    description = parser.description or help_text
    if description:
        lines += [_markdown(description), ""]
    for action in _subcommands(parser):
        lines += [f"- [`{choice.dest}`](#{_anchor(f'{parser.prog} {choice.dest}')}): {_markdown(choice.help or '')}"
                  for choice in action._choices_actions]
        lines.append("")
    for group in parser._action_groups:
        options = [action for action in group._group_actions
                   if action.help != argparse.SUPPRESS and not isinstance(action, (argparse._HelpAction,
                                                                                  argparse._SubParsersAction))]
        if options:
            lines += [f"{group.title[:1].upper()}{group.title[1:]}:", ""]
            lines += [_option(formatter, action) for action in options]
            lines.append("")
    if parser.epilog:
        lines += [_markdown(parser.epilog), ""]
    return "\n".join(lines)


def _option(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if not action.option_strings:
        invocation = formatter._format_args(action, action.dest)
    elif action.nargs == 0:
        invocation = ", ".join(action.option_strings)
    else:
        invocation = f"{', '.join(action.option_strings)} {formatter._format_args(action, action.dest.upper())}"
    required = " (required)" if action.required and action.option_strings else ""
    original, action.help = action.help, help_with_range(action)
    try:
        text = formatter._expand_help(action) if action.help else ""
    finally:
        action.help = original
    return f"- `{invocation}`{required}{': ' + _markdown(text) if text else ''}"


def _markdown(text: str) -> str:
    """Prose of a help string as one markdown paragraph: whitespace joined, ``\\``, ``<`` and
    ``*`` escaped so that they show as typed."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading ``hydraulis space import`` → ``hydraulis-space-import``."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hydraulis.cli.reference -o docs/cli.md``: write the page."""
    parser = argparse.ArgumentParser(prog="python -m hydraulis.cli.reference", description=__doc__.split("\n")[0])
    parser.add_argument("-o", "--output", required=True, type=OutputPath(), help="the page to write (docs/cli.md)")
    args = parser.parse_args(argv)
    write_text_atomically(args.output, reference())
    emit(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
