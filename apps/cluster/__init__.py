"""Rollouts and benchmarks on a Ray cluster (the ``[ray]`` extra): ``--ray`` on those commands."""
