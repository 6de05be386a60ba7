"""Analysis of finished runs: the agent's per-flow events, their plots and the handover
analyses (smoothness, mix, MCC) in `handover`, and the grid report in `grid`."""
