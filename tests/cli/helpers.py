"""``hydraulis(*args)``: the CLI run in the test's own process, answered like a subprocess.

``hydraulis.cli.main(argv)`` with ``sys.argv``, ``sys.stdout``, ``sys.stderr``, the root logger,
and (when asked) the environment and working directory swapped for the call and restored after
it, so that calls neither pay an interpreter start and torch's import each nor leak state into
the next test. Rank processes a command spawns come from one forkserver per test process (its
torch imported once): they write to the process's own descriptors, not to the captured streams,
and see the environment and working directory of the call that started it. Tests that read
ranks' lines or hand ranks an environment use :func:`hydraulis_process`.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from hydraulis.cli import main
from hydraulis.cli.output import LOG_HANDLER


@dataclass(frozen=True)
class Completed:
    """What :class:`subprocess.CompletedProcess` says of a run: its words, status and output."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def hydraulis(*args: object, env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Completed:
    """``hydraulis ARGS…`` in this process; ``env`` replaces the environment and ``cwd`` the
    working directory for the call, as ``subprocess.run`` would."""
    argv = tuple(str(arg) for arg in args)
    out, err = io.StringIO(), io.StringIO()
    with _environment(env), _directory(cwd), restored_logging(), _swapped_argv(argv), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:
            code = _exit_status(stop.code)
    return Completed(argv, code, out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    """``sys.exit``'s argument as the interpreter turns it into a status: none 0, a number itself,
    anything else printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


@contextlib.contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _directory(cwd: str | Path | None) -> Iterator[None]:
    if cwd is None:
        yield
        return
    with contextlib.chdir(cwd):
        yield


@contextlib.contextmanager
def restored_logging() -> Iterator[None]:
    """The root logger without the CLI's handler (:func:`hydraulis.cli.output.setup_logging`) and
    at its level as before, once the block ends; handlers others installed meanwhile stay."""
    root = logging.getLogger()
    level = root.level
    try:
        yield
    finally:
        root.handlers[:] = [h for h in root.handlers if h.get_name() != LOG_HANDLER]
        root.setLevel(level)


@contextlib.contextmanager
def _swapped_argv(argv: tuple[str, ...]) -> Iterator[None]:
    """``sys.argv`` as ``python -m hydraulis ARGS…`` has it (artifacts record the command line)."""
    saved = sys.argv
    sys.argv = ["hydraulis", *argv]
    try:
        yield
    finally:
        sys.argv = saved


def hydraulis_process(*args: object, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                      timeout: float = 900) -> subprocess.CompletedProcess:
    """``python -m hydraulis ARGS…`` in a process of its own: for tests of the entry point itself,
    or that read what the ranks write, or whose ranks must see ``env``."""
    return subprocess.run([sys.executable, "-m", "hydraulis", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd)
