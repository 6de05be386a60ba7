"""Example algorithms written in Python for the ccswitch agent (see ``ccswitch.algorithm``
for the API). Run one with ``ccswitch-agent --algorithm py:ccswitch.examples.MODULE:CLASS``,
e.g. ``py:ccswitch.examples.reno:Reno``."""
