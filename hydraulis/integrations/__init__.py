"""Hydraulis' planning inside other runtimes (docs/integrations.md).

* :mod:`.cp_ranks`, :mod:`.cp_groups`, :mod:`.cp_contract` — pure: hybrid context-parallel
  groups planned by dispatch stage 1 on the space's ``(k, tp, 1)`` schemes, their cost, and the
  structure Megatron-Core's consumer relies on;
* :mod:`.megatron` — ``HydraulisCPScheduler``, a drop-in for Megatron-Core's
  ``BalancedCPScheduler`` (needs the ``megatron`` extra);
* :mod:`.rank_batches` — pure: a global batch dealt to data-parallel ranks and packed into
  equally many micro-batches per rank;
* :mod:`.torch` — ``BalancedBatchSampler`` for DDP/FSDP and the Hugging Face ``Trainer``.

Nothing is imported here, so the pure modules stay importable without torch.
"""
