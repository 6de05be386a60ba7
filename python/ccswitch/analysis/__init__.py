"""Analysis of finished runs: the agent's per-flow events matched to transfers (`events`),
plots of flows over time (`plots`), the handover analyses smoothness, mix and MCC with
`ccswitch analyze` (`handover`), and the grid report (`grid`)."""
