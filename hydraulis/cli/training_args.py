"""Flags of ``hydraulis train`` and ``hydraulis check-equivalence``, derived from the job's option
tree (:mod:`hydraulis.job.options`): one flag per option, grouped by section. Every flag defaults
to None so that a given flag overrides the config it is applied to (a config file, or the
command's own defaults)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from hydraulis.base.errors import HydraulisError
from hydraulis.cli.arguments import (
    Bounded,
    FileKind,
    InputFile,
    OutputPath,
    optimizer_layout,
)
from hydraulis.job.config import TrainConfig, warmup_within_steps
from hydraulis.job.options import (
    Kind,
    Leaf,
    Section,
    job_options,
    nested_values,
    replaced,
)


def training_options(train: bool) -> Iterator[Leaf]:
    """The options a command offers: all of them for ``train``, the others without the
    ``train_only`` ones."""
    return (leaf for leaf in job_options(TrainConfig) if train or not leaf.option.train_only)


def add_training_arguments(parser: argparse.ArgumentParser, train: bool = True) -> None:
    """One flag per option, in an argument group per section."""
    options = list(training_options(train))
    for section in Section:
        leaves = [leaf for leaf in options if leaf.option.section is section]
        if leaves:
            group = parser.add_argument_group(f"[{section.value}]")
            for leaf in leaves:
                _add_flag(group, leaf)


def training_config(args: argparse.Namespace, base: TrainConfig | None) -> TrainConfig:
    """``base`` (or, when None, the required flags) with every given flag applied; a warm-up
    longer than the steps is cut to them, with a warning."""
    given = {leaf.path: _field_value(leaf, getattr(args, leaf.key)) for leaf in job_options(TrainConfig)
             if getattr(args, leaf.key, None) is not None}
    values = nested_values(given)
    if base is None:
        if "steps" not in values:
            raise HydraulisError("--steps", None, "is required (give it, or a --config file)")
        if not {"model", "init_from", "resume"} & values.keys():
            raise HydraulisError("--model", None, "is required (give it, --init-from, --resume or a --config file)")
    else:
        if "init_from" in values and "model" not in values:
            values["model"] = None
        if "proposal_file" in values and "strategies" not in values:
            values["strategies"] = ()
        elif "strategies" in values and "proposal_file" not in values:
            values["proposal_file"] = None
    values = warmup_within_steps(values, base)
    if base is None:
        base = TrainConfig(values.get("model"), values.get("strategies", ()), values["steps"],
                           proposal_file=values.get("proposal_file"), init_from=values.get("init_from"),
                           resume=values.get("resume"), checkpoint_dir=values.get("checkpoint_dir"))
    return replaced(base, values)


def _field_value(leaf: Leaf, value: object) -> object:
    """A parsed flag (or a job file's key, given as one) as the field holds it."""
    if leaf.kind is Kind.CHOICE:
        return leaf.enum(value)
    if leaf.kind in (Kind.TEXTS, Kind.PAIR):
        return tuple(value)
    if leaf.kind is Kind.LAYOUT:
        return optimizer_layout(value)
    return value


def _add_flag(group: argparse._ArgumentGroup, leaf: Leaf) -> None:
    option = leaf.option
    details = {"help": option.help, "dest": leaf.key}
    if option.metavar:
        details["metavar"] = option.metavar
    if leaf.kind is Kind.SWITCH:
        action = argparse.BooleanOptionalAction if leaf.default is True else "store_true"
        group.add_argument(leaf.flag, action=action, default=None, **details)
        return
    if leaf.kind is Kind.CHOICE:
        details["choices"] = [member.value for member in leaf.enum]
    elif option.choices is not None:
        details["choices"] = list(option.choices())
    elif option.limit is not None:
        details["type"] = Bounded(option.limit)
    elif option.reads is not None:
        details["type"] = InputFile(FileKind(option.reads))
    elif option.writes:
        details["type"] = OutputPath()
    if leaf.kind is Kind.TEXTS:
        details["action"] = "append"
    elif leaf.kind is Kind.PAIR:
        details["nargs"] = 2
    group.add_argument(leaf.flag, **details)
