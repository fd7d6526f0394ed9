"""The PyTorch runtime that executes step plans (design §9).

Pipelines of different schemes run side by side in one job (gloo on CPU, NCCL on CUDA); each
rank runs one stage of one pipeline, sharded for its tp and cp rank. fp32 master weights and
Adam moments live once, sharded, in the optimizer layout (ZeRO-1); every step the weights go out
to whatever strategy the dispatcher chose, the gradients come back and the optimizer steps
there — a strategy switch is a redistribution, never a restart. Checkpoints are written from
the optimizer layout.

What a rank holds and where a parameter's pieces live is the pure :mod:`hydraulis.layout`; the
job's configuration, SPEC syntax, step records and checkpoint manifest are :mod:`hydraulis.job`.

==========================  ==================================================================
module                      concept
==========================  ==================================================================
``run``                     a config resolved into what every rank needs (no torch)
``data``                    documents (a corpus or synthetic), batches filled to a token budget
``rank_map``                rank → pipeline, stage, cp rank, tp rank; process groups cached by rank set
``model.decoder``           the Llama-style decoder, one stage of one rank; recomputation per layer
``model.attention``         document-causal attention over packed sequences, one kernel per size
``model.segments``          which queries attend to which keys: the kernels' plans
``model.packing``           a plan's micro-batch → this rank's tensors
``model.loss``              normalisation by the whole batch's loss tokens
``parallel.tensor``         column/row-parallel linears, vocab-parallel embedding and loss
``parallel.sequence``       sequence parallelism: all-gather / reduce-scatter around the blocks
``parallel.context``        load-balanced context-parallel chunks, K/V all-gather, segments
``parallel.pipeline``       1F1B as a list of operations, shapes from the plan
``optimizer.master``        one rank's buffer: fp32 master weights, moments, the update rule
``optimizer.routes``        gradients into the optimizer layout, weights out of it (all-to-all
                            of blocks)
``planning``                step plans from the dispatcher or the service, one step ahead
``broadcast``               rank 0's plan to every rank
``gradients``               fp32 gradient accumulation across micro-batches
``step``                    one training step on one rank, one synchronisation
``trainer``                 the training loop
``checkpoint.resume``       finding and checking a checkpoint to resume (no torch)
``checkpoint.store``        writing checkpoints atomically, restoring them under any layout
``equivalence``             distributed vs single-device training
``launch``                  local processes or torchrun; process-group timeouts
``memory.report``           ``hydraulis memory``: every rank's bytes from its modules on ``meta``
``profiling``               the profiler's measuring jobs on the runtime's own layers
==========================  ==================================================================
"""
