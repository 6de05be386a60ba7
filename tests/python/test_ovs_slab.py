"""The frame slab of the ovs datapath, for real: a transfer through the OVS bridge with a
slab far too small for its window must fall back cleanly (the port program finds no free slot,
counts it, leaves the flow to the server's TCP until the slab has room again and the hole is
acknowledged, then the flow rejoins control; the shim says so once per interval, not per
packet), and arrive intact; the same transfer with the default slab stays controlled with no
slot ever missing. At exit, every slot the port program took is either given back or held by
the shim. Needs root, mahimahi, openvswitch-switch and the Rust binaries; fails rather than
skips without them."""

import re

import pytest

from test_ovs_integrity import set_up_ovs_runner, scheme, client, stats_of, shim_log

FILE_BYTES = 3_000_000

SCENARIO = f"""
name = "ovs-slab"
repetitions = 1
schemes = ["ovs:reno"]
bridge = "ovs"
timeout_s = 120
agent_settle_s = 0.5
[[clients]]
name = "rtt50"
delay_ms = 25
link = {{ mbps = 24 }}
queue_packets = 100
file_bytes = {FILE_BYTES}
"""


@pytest.fixture(scope="module")
def r(tmp_path_factory):
    with set_up_ovs_runner(tmp_path_factory.mktemp("ovs-slab"), SCENARIO) as r:
        yield r


def transfer(r, extra_args):
    s = scheme(r, "ovs:reno")
    r.prepare_scheme(s)
    r.ovs_shim.extra_args = list(extra_args)
    try:
        return r.transfer(0, client(r, "rtt50"), s, FILE_BYTES)
    finally:
        r.ovs_shim.extra_args = []


def test_an_exhausted_slab_leaves_the_flow_to_the_server_intact(r):
    row = transfer(r, ["--slab-slots", "8"])
    assert row["error"] is None and row["sha256_ok"], row
    assert row["ovs_exit"] == 0, row
    doc = stats_of(r, row)
    st, totals = doc["stats"], doc["totals"]
    assert st["slab_slots"] == 8, st
    assert st["slab_full"] >= 1 and st["unbuffered"] >= 1, f"the slab ran out and was counted: {st}"
    assert totals["fallback_reasons"].get("slab_full", 0) >= 1, totals
    # The fallback is not for good: the flow rejoined, and the port copied its segments again.
    assert totals["rejoins"] >= 1, totals
    assert st["segments"] > 8, st
    assert st["acks_rewritten"] < st["acks"], f"the port stopped controlling the flow: {st}"
    assert st["slab_in_use"] == totals["slots_held_now"] == 0, f"every slot back: {st} {totals}"
    log = shim_log(r, row)
    lines = [l for l in log.splitlines() if "for want of room" in l]
    assert 1 <= len(lines) <= 1 + int(row["tct_s"] or 60) + 1, "logged once per interval, not per packet"
    assert re.search(r"slab_full=[1-9]", lines[0]), lines


def test_the_default_slab_keeps_the_flow_controlled(r):
    row = transfer(r, [])
    assert row["error"] is None and row["sha256_ok"], row
    doc = stats_of(r, row)
    st, totals = doc["stats"], doc["totals"]
    assert (st["slab_full"], st["unbuffered"], totals["fallbacks"]) == (0, 0, 0), (st, totals)
    assert st["acks_rewritten"] > 0 and st["segments"] > FILE_BYTES // 1500, st
    # No traffic at exit: the slots in use are exactly those the shim holds (none leaked).
    assert st["slab_in_use"] == totals["slots_held_now"], f"no slot leaked: {st} {totals}"
