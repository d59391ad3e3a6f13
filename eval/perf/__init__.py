"""Benchmarks (run as scripts) and the scale runner of `cwa eval perf` (scale.py)."""
