"""Terminal output of the CLI: aligned tables, JSON, logging set-up, argument parsers."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence

from hydraulis.errors import HydraulisError
from hydraulis.types import OptimizerLayout, SchemeOptions

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


def emit(text: str) -> None:
    sys.stdout.write(text + "\n")


def emit_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def setup_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)


def command_line() -> str:
    return " ".join(["hydraulis", *sys.argv[1:]])


def int_list(flag: str):
    """An argparse type for comma-separated positive integers, e.g. ``1,2,4``."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(v) for v in text.split(",") if v.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} must be comma-separated integers") from None
        if not values or min(values) < 1:
            raise argparse.ArgumentTypeError(f"{flag}: {text!r} must list integers >= 1")
        return values

    return parse


def optimizer_layout(text: str) -> OptimizerLayout:
    """``DP,TP,PP`` → :class:`OptimizerLayout`."""
    parts = text.split(",")
    if len(parts) != 3:
        raise HydraulisError("optimizer_layout", text, "must be DP,TP,PP (three integers)")
    try:
        dp, tp, pp = (int(p) for p in parts)
    except ValueError:
        raise HydraulisError("optimizer_layout", text, "must be DP,TP,PP (three integers)") from None
    return OptimizerLayout(dp, tp, pp)


def scheme_variants(texts: Sequence[str] | None) -> tuple[SchemeOptions, ...]:
    """``--options`` values (``none`` for the plain scheme) → variants; default the plain scheme."""
    return tuple(SchemeOptions.parse("" if text.strip() == "none" else text, "--options")
                 for text in texts or ["none"])


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
