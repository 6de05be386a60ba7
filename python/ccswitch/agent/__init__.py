"""Talking to the ccswitch agent: the operator interface's client and `ccswitch operator`
(`operator`), and the algorithms and policies the agent binary offers (`algorithms`)."""
