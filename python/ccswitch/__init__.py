"""ccswitch: per-flow, switchable congestion control for unmodified TCP senders."""
