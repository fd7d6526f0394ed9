"""Core types of Hydraulis and the glossary they spell out.

Every part of the system speaks these words (design §2); each is one frozen dataclass, validated at
construction so that a value that exists is a valid value. They live in one module per concept
and this module re-exports them all, so ``from hydraulis.base.types import X`` names any of them. The
glossary (word, module, meaning): :data:`__all__`.

Units: times in milliseconds, memory in bytes, lengths in tokens.
"""

from __future__ import annotations

from hydraulis.base.scheme import Recompute, Scheme, SchemeOptions
from hydraulis.base.scheme_profile import FitQuality, SchemeProfile, TimeCoefficients
from hydraulis.base.space import MemoryModel, PipelineModel, Provenance, SchemeSpace, SpaceSource
from hydraulis.base.specs import Cluster, DeviceSpec, ModelSpec, OptimizerLayout
from hydraulis.base.step_plan import (
    SYNTHESIS_EVALUATIONS_DEFAULT,
    BatchingMethod,
    MicroBatch,
    MicroBatches,
    PipelineClass,
    PipelinePlan,
    PipelinePlans,
    StepPlan,
    Synthesis,
    Synthesise,
)
from hydraulis.base.strategy import LOSS_CHUNK_TOKENS, PipelineGroup, Proposal, ProposedStrategy, SolverReport, Strategy

__all__ = [
    "LOSS_CHUNK_TOKENS", "BatchingMethod", "Cluster", "DeviceSpec", "FitQuality", "MemoryModel", "MicroBatch", "MicroBatches",
    "ModelSpec", "OptimizerLayout", "PipelineClass", "PipelineGroup", "PipelineModel", "PipelinePlan", "PipelinePlans",
    "Proposal", "ProposedStrategy", "Provenance", "Recompute", "SYNTHESIS_EVALUATIONS_DEFAULT", "Scheme",
    "SchemeOptions", "SchemeProfile", "SchemeSpace", "SolverReport", "SpaceSource", "StepPlan", "Strategy",
    "Synthesis", "Synthesise", "TimeCoefficients",
]
"""The glossary: each word, the module that defines it (the ``module`` column) and its meaning.

=====================  ===========  ========================================================================
word                   module       meaning
=====================  ===========  ========================================================================
scheme                 scheme       one parallel layout of a single model replica, ``(cp, tp, pp)``; it
                                    uses ``cp·tp·pp`` devices (:class:`Scheme`)
scheme profile         space        a scheme's fitted time coefficients ``a, b, c`` and memory terms
                                    (:class:`SchemeProfile`)
scheme space           space        all scheme profiles plus model, cluster and memory facts, with
                                    provenance (:class:`SchemeSpace`)
pipeline               strategy     one model replica running one scheme (a data-parallel member); a
                                    strategy holds them in groups of identical pipelines
                                    (:class:`PipelineGroup`)
strategy               strategy     a multiset of pipelines using at most the cluster's devices, e.g.
                                    ``1×(1,16,1) + 6×(1,8,1)`` (:class:`Strategy`)
optimizer layout       specs        the one homogeneous ``(dp, tp, pp)`` layout that holds fp32 master
                                    weights and Adam moments, whatever strategy computes a step
                                    (:class:`OptimizerLayout`)
proposal               strategy     the few strategies the planner hands to training, one chosen per step
                                    (:class:`Proposal`)
micro-batch            step_plan    packed sequences run together through one pipeline (:class:`MicroBatch`;
                                    a pipeline's stored as flat arrays: :class:`MicroBatches`)
pipeline class         step_plan    neighbouring pipelines of a step plan with one scheme and longest
                                    sequence, held once with their count (:class:`PipelineClass`)
step plan              step_plan    for one global batch: chosen strategy, sequences per pipeline, their
                                    packing into micro-batches, predicted time (:class:`StepPlan`)
synthesis              step_plan    a strategy made for one step from the proposal's (or the space's)
                                    schemes when it beats every proposal strategy, switch included
                                    (:class:`Synthesis`)
batching method        step_plan    how a batch is cut into micro-batches (:class:`BatchingMethod`)
=====================  ===========  ========================================================================
"""
