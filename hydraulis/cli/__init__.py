"""The ``hydraulis`` command. Each subcommand lives in its own module with a ``register``
function; handlers parse, call one library function and print or write the result. Bad input
prints one line naming the field and exits with status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hydraulis import __version__
from hydraulis.cli import (
    analyze,
    check_equivalence,
    data,
    fuse,
    plan_step,
    profile,
    propose,
    serve,
    simulate,
    space,
    train,
)
from hydraulis.cli.output import setup_logging
from hydraulis.errors import HydraulisError

COMMANDS = (space, profile, data, analyze, propose, plan_step, simulate, fuse, train, check_equivalence, serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hydraulis",
        description="Plan and run Transformer training over variable-length data with dynamic "
                    "heterogeneous parallel strategies.",
    )
    parser.add_argument("--version", action="version", version=f"hydraulis {__version__}")
    parser.add_argument("--log-level", default="warning",
                        choices=("debug", "info", "warning", "error"), help="default: warning")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level)
    try:
        args.run(args)
    except HydraulisError as error:
        sys.stderr.write(f"hydraulis: error: {error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("hydraulis: interrupted\n")
        return 130
    return 0
