"""Benchmark scripts: each prints its figures (medians of several runs); none of them is a test.

Run them all with ``.venv/bin/python -m benchmarks`` (see README, "Benchmarks").
"""
