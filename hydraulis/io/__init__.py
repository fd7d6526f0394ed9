"""The commands' file work, above the artifacts: each reads and writes files through
:mod:`hydraulis.artifacts` for one command.

=====================  ==================================================================
module                 concept
=====================  ==================================================================
``profile_run``        ``hydraulis profile``: plan → cache → measure → fit → scheme space
``simulation_inputs``  a simulation's scheme spaces and lengths, read or made
``length_report``      a corpus' length report: plots, lengths file, summary, analysis
``stdlib_corpus``      the CPython standard library as a JSONL corpus
=====================  ==================================================================
"""
