"""Example algorithms written in Python for the ccswitch agent (see ``ccswitch.authoring``
for the API). Run one with ``ccswitch-agent --algorithm py:ccswitch.authoring.examples.MODULE:CLASS``,
e.g. ``py:ccswitch.authoring.examples.reno:Reno``."""
