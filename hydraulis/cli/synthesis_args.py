"""Flags of per-step strategy synthesis, shared by ``plan-step`` and ``simulate``
(:mod:`hydraulis.dispatch.synthesis`)."""

from __future__ import annotations

import argparse

from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions
from hydraulis.errors import HydraulisError
from hydraulis.planner.options import synthesis_schemes
from hydraulis.types import Proposal, SchemeSpace


def add_synthesis_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--synthesise", choices=[m.value for m in Synthesise], default=Synthesise.PROPOSAL.value,
                        help="make a strategy for each step when it beats the proposal's, switch included: from "
                             "the proposal's schemes (default proposal), the scheme space's (space), or never (off)")
    parser.add_argument("--synthesis-evaluations", type=int, default=SynthesisOptions.evaluations, metavar="N",
                        help="strategies the dispatcher may plan per step while synthesising "
                             f"(default {SynthesisOptions.evaluations})")


def synthesis_options(mode: str, evaluations: int, proposal: Proposal, space: SchemeSpace | None,
                      space_flag: str = "--space") -> SynthesisOptions:
    """The options the flags ask for; ``space`` mode needs the scheme space (``space_flag``)."""
    kind = Synthesise(mode)
    if kind is Synthesise.SPACE and space is None:
        raise HydraulisError("--synthesise", mode, f"needs the scheme space: give {space_flag}")
    schemes = synthesis_schemes(space, proposal) if kind is Synthesise.SPACE else ()
    return SynthesisOptions(kind, schemes, evaluations)
