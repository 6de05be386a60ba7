"""The emulated network of an experiment: its namespaces and links (`namespaces`), the bridge
of `ovs:` schemes and the ovs datapath's shim (`bridges`), and the daemons that run in them
(`daemons`)."""
