"""Flags of per-step strategy synthesis, shared by ``plan-step`` and ``simulate``
(:mod:`hydraulis.dispatch.synthesis`)."""

from __future__ import annotations

import argparse

from hydraulis.base import limits
from hydraulis.cli.arguments import Bounded
from hydraulis.dispatch.synthesis import Synthesise, SynthesisOptions


def add_synthesis_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--synthesise", choices=[m.value for m in Synthesise], default=Synthesise.PROPOSAL.value,
                        help="make a strategy for each step when it beats the proposal's, switch included: from "
                             "the proposal's schemes (default proposal), the scheme space's (space), or never (off)")
    parser.add_argument("--synthesis-evaluations", type=Bounded(limits.SYNTHESIS_EVALUATIONS), default=SynthesisOptions.evaluations, metavar="N",
                        help="strategies the dispatcher may plan per step while synthesising "
                             f"(default {SynthesisOptions.evaluations})")
