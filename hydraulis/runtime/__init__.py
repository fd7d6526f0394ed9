"""The PyTorch runtime that executes step plans (DESIGN §7).

Pipelines of different schemes run side by side in one job (gloo on CPU, NCCL on CUDA); each
rank runs one stage of one pipeline, sharded for its tp and cp rank; gradients from all
pipelines are summed in the canonical layout; fp32 master weights are updated and re-sliced
for whatever strategy computes the next step.

==========================  ==================================================================
module                      concept
==========================  ==================================================================
``config``                  job configuration (no torch)
``layout``                  stages as contiguous layer ranges; a strategy as the runtime runs it
``strategy_spec``           the ``cp,tp,pp[:L1/…][xN]+…`` SPEC syntax
``run``                     a config resolved into what every rank needs (no torch)
``rank_map``                rank → pipeline, stage, cp rank, tp rank; process groups
``sharding``                canonical parameters and each rank's shards
``model``                   the Llama-style decoder, one stage of one rank
``attention``               document-causal attention over packed sequences
``packing``                 a plan's micro-batch → this rank's tensors
``parallel.tensor``         column/row-parallel linears, vocab-parallel embedding and loss
``parallel.context``        load-balanced context-parallel chunks, K/V all-gather
``parallel.pipeline``       1F1B over micro-batches of different lengths, shapes ahead of tensors
``loss``                    normalisation by the whole batch's loss tokens
``grad_sync``               gradient reduction across different shardings
``master``                  fp32 master weights and optimizer
``step``                    one training step on one rank
``trainer``                 the training loop and its per-step log line
``simple_plan``             a greedy stand-in for the dispatcher
``data``                    synthetic lengths and token documents
``equivalence``             distributed vs single-device training
``launch``                  local processes or torchrun; process-group timeouts
==========================  ==================================================================
"""
