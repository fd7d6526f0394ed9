"""The data side (design §4): corpora read offline, a locally trained tokenizer, global batches
filled to a token budget, and the length analysis that shows a corpus' long tail.

=================  ==========================================================================
module             concept
=================  ==========================================================================
``sources``        a directory of source files → documents, undecodable files skipped and counted
``corpus``         JSONL / Parquet / plain text / a directory through Hugging Face ``datasets``
``tokenizer``      byte-level BPE trained locally and cached, or any local ``tokenizer.json``
``loader``         shuffled documents → pieces ≤ the maximum length → batches of ≤ T tokens
``analysis``       length statistics: percentiles, shares per bucket, per-step maxima
``synth``          synthetic long tail: lognormal body + Pareto tail
``measure``        a corpus measured in tokens (load, tokenizer, tokenize)
``fingerprint``    a corpus' content hash
=================  ==========================================================================

Importing this package is cheap: ``datasets``, ``tokenizers`` and ``matplotlib`` are imported
by the functions that need them.
"""
