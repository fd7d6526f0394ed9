"""Hydraulis' planning inside other runtimes (docs/integrations.md); nothing is imported here, so
the pure modules stay importable without torch.

* :mod:`.cp_ranks`, :mod:`.cp_groups`, :mod:`.cp_plan`, :mod:`.cp_kernels`, :mod:`.cp_contract`
  — pure: hybrid context-parallel options on the space's ``(k, tp, 1)`` schemes, the cost of a
  plan, the several-group plan of a step and its compiled loops, and the structure Megatron-Core's
  consumer relies on;
* :mod:`.megatron` — ``HydraulisCPScheduler``, a drop-in for Megatron-Core's
  ``BalancedCPScheduler`` (needs the ``megatron`` extra only for :func:`~.megatron.install`);
* :mod:`.model_description` — pure: a model's shape from a Hugging Face, Megatron or torchtitan
  description, and a GPU's device preset;
* :mod:`.rank_batches` — pure: a global batch dealt to DP ranks, equally many micro-batches each;
* :mod:`.torch` — ``BalancedBatchSampler`` for DDP/FSDP; :mod:`.hf` — ``BalancedTrainer``, the
  Hugging Face ``Trainer`` on it (needs transformers and accelerate); :mod:`.torchtitan` —
  ``BalancedTitanDataLoader``, torchtitan's data loader contract on it (needs no torchtitan).
"""
