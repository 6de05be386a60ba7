"""Experiment harness: scenarios, the emulated topology, the runner and its results."""
