"""The ``hydraulis`` command. Each subcommand lives in its own module with a ``register``
function; handlers parse, call one library function and print or write the result. Bad input
(or a path that cannot be read or written) prints one line naming the field and exits with status 2;
an unexpected failure prints one line
and exits with status 1 (its traceback goes to the log at ``--log-level debug``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from hydraulis import __version__
from hydraulis.base.errors import HydraulisError
from hydraulis.cli import (
    analyze,
    check_equivalence,
    data,
    export,
    fuse,
    memory,
    plan_step,
    profile,
    propose,
    serve,
    simulate,
    space,
    train,
)
from hydraulis.cli.arguments import Parser
from hydraulis.cli.output import setup_logging

COMMANDS = (space, profile, data, analyze, propose, plan_step, simulate, fuse, memory, train, check_equivalence, export,
            serve)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    except OSError as error:  # a path the user named cannot be read or written: bad input too
        where = f"{error.filename}: " if error.filename else ""
        sys.stderr.write(f"hydraulis: error: {where}{error.strerror or error}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("hydraulis: interrupted\n")
        return 130
    except MemoryError:
        sys.stderr.write("hydraulis: error: out of memory; the inputs ask for more than this machine has\n")
        return 1
    except Exception as error:  # the last line of defence: one line, never a traceback on the terminal
        logging.getLogger(__name__).debug("unexpected failure", exc_info=True)
        sys.stderr.write(f"hydraulis: internal error (a bug, please report it): {type(error).__name__}: "
                         f"{str(error)[:300]}; rerun with --log-level debug for the traceback\n")
        return 1
    return 0
