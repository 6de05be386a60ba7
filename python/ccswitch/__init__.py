"""ccswitch: per-flow congestion control for unmodified TCP senders, handed over while flows run."""

from importlib import metadata as _metadata

try:
    #: The installed package's version (pyproject.toml), the same as the Cargo workspace's.
    __version__ = _metadata.version("ccswitch")
except _metadata.PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"
