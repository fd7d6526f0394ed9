"""Argument types of the CLI: numbers within their limits (:mod:`hydraulis.base.limits`), lists of
them, input files, and a parser whose errors are one line.

Every numeric flag uses :class:`Bounded` or :class:`BoundedList`, so argparse refuses a value
out of range before the command starts, naming the flag, the value and the range, with exit
status 2. Input files use :class:`InputFile`, which says what the file must hold (the fuzz test
writes hostile contents of that kind); paths the command writes use :class:`OutputPath`.
"""

from __future__ import annotations

import argparse
import math
import os
from enum import Enum
from pathlib import Path

from hydraulis.base import limits
from hydraulis.base.errors import HydraulisError
from hydraulis.base.limits import Limit
from hydraulis.base.types import OptimizerLayout


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: ``hydraulis propose: error: argument
    --devices: ... (see hydraulis propose --help)``, exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def format_help(self) -> str:
        for action in self._actions:
            action.help = help_with_range(action)
        return super().format_help()

    def parse_known_args(self, args=None, namespace=None):
        parsed, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            if action.nargs is None and action.option_strings and getattr(parsed, action.dest, None) == []:
                self.error(f"argument {'/'.join(action.option_strings)}: expected one value")  # "--opt=--"
        return parsed, rest


def help_with_range(action: argparse.Action) -> str | None:
    """``action``'s help with the range of its bounded number appended (once): ``devices to plan
    for; range [1, 65536]``, as ``--help`` and ``docs/cli.md`` show it."""
    kind = action.type
    if isinstance(kind, (Bounded, BoundedList)) and action.help and "; range " not in action.help:
        return f"{action.help}; range {kind.limit.interval}"
    return action.help


class OutputPath:
    """An argparse type for a path the command writes (a file or a folder): refused at once, before
    any work, when its nearest existing ancestor is not a folder this process may write into."""

    __name__ = "path"

    def __call__(self, text: str) -> str:
        if not text or "\x00" in text:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a path")
        ancestor = Path(text).absolute().parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise argparse.ArgumentTypeError(f"{shown(text)} cannot be written: {ancestor} is not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{shown(text)} cannot be written: {ancestor} is not writable")
        return text


class Bounded:
    """An argparse type: a number within ``limit``. Integers may be written ``1e6`` or ``1_000``."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        self.__name__ = "integer" if limit.integer else "number"

    def __call__(self, text: str) -> int | float:
        value = _parse_number(text, self.limit.integer)
        problem = self.limit.problem(value)
        if problem:
            raise argparse.ArgumentTypeError(f"{shown(text)} {problem}")
        return int(value) if self.limit.integer else float(value)


class BoundedList:
    """An argparse type: comma-separated integers, each within ``limit``, at most
    ``limits.TOKEN_COUNTS.maximum`` of them, e.g. ``1,2,4``."""

    def __init__(self, limit: Limit, count: Limit = limits.TOKEN_COUNTS) -> None:
        self.limit, self.count = limit, count
        self.__name__ = "list"

    def __call__(self, text: str) -> tuple[int, ...]:
        parts = [part for part in text.split(",") if part.strip()]
        problem = self.count.problem(len(parts))
        if problem:
            raise argparse.ArgumentTypeError(f"{shown(text)}: the number of values {problem}")
        return tuple(Bounded(self.limit)(part.strip()) for part in parts)


class FileKind(str, Enum):
    """What an input file holds."""

    LENGTHS = "lengths"
    SCHEME_SPACE = "scheme_space"
    PROPOSAL = "proposal"
    TRAIN_CONFIG = "train_config"
    POOL = "pool"
    CORPUS = "corpus"
    TOKENIZER = "tokenizer"
    CHECKPOINT = "checkpoint"
    HF_MODEL = "hf_model"
    STEP_PLAN = "step_plan"
    FUSED_PROBLEM = "fused_problem"
    CLUSTER = "cluster"


class InputFile:
    """An argparse type for a path the command reads; the command's reader checks the contents."""

    def __init__(self, kind: FileKind) -> None:
        self.kind = kind
        self.__name__ = f"{kind.value} file"

    def __call__(self, text: str) -> str:
        if not text or "\x00" in text:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a path")
        return text


def optimizer_layout(text: str) -> OptimizerLayout:
    """``DP,TP,PP`` → :class:`OptimizerLayout`, each degree within its limit."""
    parts = text.split(",")
    if len(parts) != 3:
        raise HydraulisError("optimizer_layout", text, "must be DP,TP,PP (three integers)")
    try:
        dp, tp, pp = (limits.PARALLEL_DEGREE.check(_parse_number(p, True), "optimizer_layout") for p in parts)
    except argparse.ArgumentTypeError:
        raise HydraulisError("optimizer_layout", text, "must be DP,TP,PP (three integers)") from None
    return OptimizerLayout(dp, tp, pp)


def _parse_number(text: str, integer: bool) -> int | float:
    cleaned = text.strip()
    try:
        return int(cleaned)
    except ValueError:
        pass
    try:
        value = float(cleaned)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not {'an integer' if integer else 'a number'}") from None
    if integer and math.isfinite(value) and value.is_integer():
        return int(value)
    return value


def shown(text: str) -> str:
    """``text`` quoted, its middle elided when long: ``'99999…9999' (5000 characters)``."""
    if len(text) <= 40:
        return repr(text)
    return f"{text[:16]!r}…{text[-8:]!r} ({len(text)} characters)"
