"""The model one rank runs: the Llama-style decoder stage (:mod:`.decoder`), document-causal
attention over packed sequences (:mod:`.attention`) and its kernels' attention plans
(:mod:`.attention_spans`: which queries attend to which keys), a plan's micro-batch as tensors
(:mod:`.packing`) and the loss normalised by the whole batch (:mod:`.loss`)."""
