"""Experiment harness: scenarios, the runner and its results, statistics, sweeps, benchmarks."""
