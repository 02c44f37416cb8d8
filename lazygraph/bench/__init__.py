"""Benchmarks whose figures BENCHMARKS.md quotes: every one an importable function that returns its
figures as a dict, run from the command line by `lazygraph bench` (see ``lazygraph.api``)."""
