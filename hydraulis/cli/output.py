"""Terminal output of the CLI: aligned tables, JSON, logging set-up."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from hydraulis.base.types import SchemeOptions
from hydraulis.planner.config import Variants

OPTIONS_HELP = ("scheme options to measure every degree under, as in a SPEC's brackets: none (the plain scheme), "
                "sp, recompute=selective|full|full:K (the first K layers of each stage) or several joined by commas, "
                "e.g. sp,recompute=full; repeat for "
                "more variants, each a scheme of its own (default: none; sp applies where tp > 1)")


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Right-aligned columns, a header and a rule."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 strategy``, ``2 strategies``, ``0 steps``: the count with the word in the right number
    (``many`` when the plural is not ``word + "s"``, or ``word[:-1] + "ies"`` for a final ``y``)."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {many or (word[:-1] + 'ies' if word.endswith('y') else word + 's')}"


def emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def emit_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


LOG_HANDLER = "hydraulis-cli"
"""The name of the root handler :func:`setup_logging` installs."""


class _StderrHandler(logging.StreamHandler):
    """Writes each record to ``sys.stderr`` as it is at that moment, not as it was at set-up."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def setup_logging(level: str) -> None:
    """The root logger at ``level``, writing to ``sys.stderr`` through one handler of ours: a
    second call (the CLI run again in one process) replaces it instead of adding another, and
    handlers others installed stay."""
    root = logging.getLogger()
    handler = _StderrHandler()
    handler.set_name(LOG_HANDLER)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [h for h in root.handlers if h.get_name() != LOG_HANDLER] + [handler]
    root.setLevel(level.upper())


def command_line() -> str:
    return " ".join(["hydraulis", *sys.argv[1:]])


def scheme_variants(texts: Sequence[str] | None) -> tuple[SchemeOptions, ...]:
    """``--options`` values (``none`` for the plain scheme) → variants; default the plain scheme."""
    return tuple(SchemeOptions.parse("" if text.strip() == "none" else text, "--options")
                 for text in texts or ["none"])


def add_variants_argument(parser: argparse.ArgumentParser, default: Variants, help_text: str) -> None:
    """``--variants none|all`` (scheme variants: sequence parallelism, recomputation of k layers
    per stage; see hydraulis.planner.variants)."""
    parser.add_argument("--variants", choices=[v.value for v in Variants], default=default.value,
                        help=f"{help_text} (default {default.value})")


def options_cell(options: Sequence[str]) -> str:
    """A table cell of a scheme's options, ``-`` for none."""
    return ",".join(options) or "-"


def _cell(value: object) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e4 or abs(value) < 1e-3:
            return f"{value:.4g}"
        return f"{value:.4f}".rstrip("0").rstrip(".")
    return str(value)
