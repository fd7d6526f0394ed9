"""The job's options as one tree: every field of :class:`~hydraulis.job.config.TrainConfig` (and
of the :class:`~hydraulis.job.config.RuntimeOptions` it holds) is declared once, with
:func:`option` as its metadata, naming its section, its help text and, for a number, its limit.

The ``train`` flags (:mod:`hydraulis.cli.training_args`), the TOML job file's sections and keys
(:mod:`hydraulis.artifacts.job_file`), the saved JSON (:mod:`hydraulis.artifacts.train_config`)
and so ``docs/cli.md`` are all derived by walking the tree with :func:`job_options`: a flag is
``--KEY`` (``_`` written ``-``), the TOML key ``KEY`` in ``[SECTION]``. Adding an option is one
field with its ``option(...)``. A switch that is off by default is ``--KEY``; one that is on is
``--KEY``/``--no-KEY``.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import MISSING, dataclass
from enum import Enum

from hydraulis.base.limits import Limit
from hydraulis.base.types import OptimizerLayout


class Section(str, Enum):
    """The job file's sections, in the order ``--help`` and the TOML file show them."""

    MODEL = "model"
    TRAINING = "training"
    PARALLELISM = "parallelism"
    OPTIMIZER = "optimizer"
    LR_SCHEDULER = "lr_scheduler"
    RUNTIME = "runtime"
    CHECKPOINT = "checkpoint"
    METRICS = "metrics"


class Kind(str, Enum):
    """What a value is, read from the field's type: how a flag parses it, how TOML and JSON hold it."""

    SWITCH = "switch"
    INTEGER = "integer"
    NUMBER = "number"
    TEXT = "text"
    CHOICE = "choice"
    TEXTS = "texts"
    PAIR = "pair"
    LAYOUT = "layout"


@dataclass(frozen=True)
class Option:
    """How one field is offered. ``key`` is the TOML key and, with ``-`` for ``_``, the flag
    (default: the field's name); ``limit`` bounds a number; ``reads`` names the kind of file a
    path holds (a :class:`hydraulis.cli.arguments.FileKind` value), ``writes`` marks a path the
    job writes; ``choices`` lists a text's accepted values; ``train_only`` options are not offered by ``check-equivalence``."""

    section: Section
    help: str
    key: str | None = None
    limit: Limit | None = None
    reads: str | None = None
    writes: bool = False
    metavar: str | tuple[str, ...] | None = None
    choices: Callable[[], Sequence[str]] | None = None
    train_only: bool = False


@dataclass(frozen=True)
class Leaf:
    """One option of the tree: ``path`` from the root (``("runtime", "lr")``), its value's
    ``kind``, ``enum`` for a choice, ``optional`` when None is a value, the dataclass
    ``default`` (``MISSING`` for a required field)."""

    path: tuple[str, ...]
    option: Option
    kind: Kind
    optional: bool
    default: object
    enum: type[Enum] | None = None

    @property
    def name(self) -> str:
        return self.path[-1]

    @property
    def key(self) -> str:
        return self.option.key or self.name

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


def option(section: Section, help: str, **details) -> dict[str, Option]:
    """The metadata of a dataclass field offered as a flag and a TOML key (the arguments of
    :class:`Option`): ``lr: float = field(default=1e-3, metadata=option(Section.OPTIMIZER, "peak
    learning rate", limit=limits.LEARNING_RATE))``."""
    return {"option": Option(section, help, **details)}


@functools.cache
def job_options(root: type) -> tuple[Leaf, ...]:
    """Every option under the dataclass ``root``, depth first, in field order; a field whose type
    is a dataclass without an :class:`Option` is a branch of the tree."""
    return tuple(_walk(root, ()))


def nested_values(values: dict[tuple[str, ...], object]) -> dict[str, object]:
    """``{("runtime", "lr"): 1e-3, ("steps",): 5}`` → ``{"runtime": {"lr": 1e-3}, "steps": 5}``."""
    tree: dict[str, object] = {}
    for path, value in values.items():
        branch = tree
        for name in path[:-1]:
            branch = branch.setdefault(name, {})
        branch[path[-1]] = value
    return tree


def replaced(config, values: dict[str, object]):
    """``config`` with the nested ``values`` (:func:`nested_values`) replaced, branch by branch."""
    changes = {name: replaced(getattr(config, name), value) if isinstance(value, dict) else value
               for name, value in values.items()}
    return dataclasses.replace(config, **changes)


def _walk(cls: type, prefix: tuple[str, ...]) -> Iterator[Leaf]:
    hints = typing.get_type_hints(cls)
    for spec in dataclasses.fields(cls):
        kind = hints[spec.name]
        if "option" not in spec.metadata:
            if not dataclasses.is_dataclass(kind):
                raise TypeError(f"{cls.__name__}.{spec.name} has no option(...) and is no branch")
            yield from _walk(kind, (*prefix, spec.name))
            continue
        union = typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, _UNION) else (kind,)
        members = [t for t in union if t is not type(None)]
        optional = len(members) < len(union)
        value_kind, enum = _kind(members[0], f"{cls.__name__}.{spec.name}")
        default = spec.default if spec.default is not MISSING else (
            spec.default_factory() if spec.default_factory is not MISSING else MISSING)
        yield Leaf((*prefix, spec.name), spec.metadata["option"], value_kind, optional, default, enum)


_UNION = type(int | None)


def _kind(value_type: object, where: str) -> tuple[Kind, type[Enum] | None]:
    if isinstance(value_type, type) and issubclass(value_type, Enum):
        return Kind.CHOICE, value_type
    simple = {bool: Kind.SWITCH, int: Kind.INTEGER, float: Kind.NUMBER, str: Kind.TEXT, OptimizerLayout: Kind.LAYOUT}
    if value_type in simple:
        return simple[value_type], None
    if value_type == tuple[str, ...]:
        return Kind.TEXTS, None
    if value_type == tuple[float, float]:
        return Kind.PAIR, None
    raise TypeError(f"{where}: no option kind for {value_type!r}")
