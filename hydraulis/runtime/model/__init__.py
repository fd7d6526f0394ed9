"""The model one rank runs: the Llama-style decoder stage (:mod:`.decoder`), document-causal
attention over packed sequences (:mod:`.attention`) and the plans of its kernels
(:mod:`.segments`), a plan's micro-batch as tensors (:mod:`.packing`) and the loss normalised by
the whole batch (:mod:`.loss`)."""
