"""The agent's operator interface through the Python client and `ccswitch operator`: a real
`ccswitch-agent` with --operator-socket, flows from a fake CCP datapath speaking the wire
protocol on its datapath socket. Lists flows, pins ports, prefixes and flows (a pinned flow
is handed over at its next report), loads policies by name and as text, and answers unknown or
malformed requests with clear errors while staying up. Needs the Rust binaries (make build);
fails rather than skips without them. The client-side helpers at the end need nothing."""

import json
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from ccswitch.agent import operator
from ccswitch.agent.operator import OperatorClient, OperatorError
from ccswitch.experiments import environment
from agent_process import Agent
from fake_datapath import (ANSWER_TIMEOUT_S, CLIENT, CLIENT_PORT, HEADER, INSTALL_EXPR, MSS_BYTES, RTT_US, SERVER,
                           SERVER_PORT, FakeDatapath)


def start_agent(tmp_path, *extra):
    return Agent(tmp_path, ["--algorithm", "reno", "--log-level", "debug", *extra])


@pytest.fixture
def agent(tmp_path):
    a = start_agent(tmp_path)
    yield a
    a.stop()


def only_flow(c):
    flows = c.list_flows()
    assert len(flows) == 1, flows
    return flows[0]


def wait_for(predicate, what):
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_fresh_agent_has_no_flows_pins_or_policy(agent):
    with agent.client() as c:
        assert c.list_flows() == []
        assert c.list_pins() == []
        assert c.policy() is None


def test_port_and_prefix_pins_are_listed_and_removed(agent):
    with agent.client() as c:
        assert c.pin("bbr", port=443) == "pinned port 443 to bbr (0 flows now)"
        assert c.pin("cubic:beta=0.8", prefix="10.0.0.0/8") == "pinned prefix 10.0.0.0/8 to cubic:beta=0.8 (0 flows now)"
        assert c.pin("vegas", prefix="2001:db8::/32").startswith("pinned prefix 2001:db8::/32 to vegas")
        assert c.pin("westwood", port=443) == "pinned port 443 to westwood (0 flows now)", "replaces"
        assert c.list_pins() == [
            {"kind": "port", "value": 443, "algorithm": "westwood", "flows": 0},
            {"kind": "prefix", "value": "10.0.0.0/8", "algorithm": "cubic:beta=0.8", "flows": 0},
            {"kind": "prefix", "value": "2001:db8::/32", "algorithm": "vegas", "flows": 0},
        ]
        assert c.unpin(port=443) == "unpinned port 443 (0 flows now)"
        assert [p["value"] for p in c.list_pins()] == ["10.0.0.0/8", "2001:db8::/32"]
        with pytest.raises(OperatorError, match="^no pin on port 443$"):
            c.unpin(port=443)
        with pytest.raises(OperatorError, match="^no pin on prefix 10.0.0.0/16$"):
            c.unpin(prefix="10.0.0.0/16")


def test_a_flow_is_listed_and_switches_to_its_pin_at_the_next_report(agent):
    dp = FakeDatapath(agent.socket)
    try:
        dp.create(sid=3)
        dp.report(sid=3)
        with agent.client() as c:
            f = only_flow(c)
            assert (f["datapath"], f["sid"], f["algorithm"], f["pinned"]) == (1, 3, "reno", None)
            assert (f["src"], f["sport"], f["dst"], f["dport"]) == (SERVER, SERVER_PORT, CLIENT, CLIENT_PORT)
            assert (f["reports"], f["handovers"]) == (1, 0)
            assert f["cwnd_bytes"] and f["cwnd_bytes"] >= 10 * MSS_BYTES

            assert c.pin("cubic", flow=(1, 3)) == "pinned flow 1:3 to cubic (1 flow now)"
            f = only_flow(c)
            assert (f["algorithm"], f["pinned"]) == ("reno", "cubic"), "handed over at the next report"
            dp.report(sid=3)
            f = only_flow(c)
            assert (f["algorithm"], f["pinned"], f["handovers"], f["reports"]) == ("cubic", "cubic", 1, 2)

            # A prefix pin covers the flow, but the flow pin is more specific.
            assert c.pin("bbr", prefix="10.20.0.0/16") == "pinned prefix 10.20.0.0/16 to bbr (1 flow now)"
            dp.report(sid=3)
            assert only_flow(c)["algorithm"] == "cubic"
            c.unpin(flow=(1, 3))
            dp.report(sid=3)
            f = only_flow(c)
            assert (f["algorithm"], f["pinned"], f["handovers"]) == ("bbr", "bbr", 2)

            with pytest.raises(OperatorError, match=r"no flow 1:99 \(datapath 1, socket id 99\)"):
                c.pin("bbr", flow=(1, 99))

            dp.close_flow(sid=3)
            wait_for(lambda: c.list_flows() == [], "the closed flow leaves the list")
            assert [p["kind"] for p in c.list_pins()] == ["prefix"]
    finally:
        dp.close()


def test_policies_load_by_name_and_as_text(agent):
    builtin = os.path.join(environment.repo_root(), "agent", "policies", "mystique.toml")
    with agent.client() as c:
        assert c.load_policy("mystique") == "loaded policy mystique (0 flows to choose for, 0 pinned)"
        p = c.policy()
        assert (p["name"], p["origin"]) == ("mystique", "built-in mystique")
        assert p["summary"].startswith(f"mystique (built-in mystique): {p['description']}\n")
        with open(builtin) as f:
            text = f.read().replace('name = "mystique"', 'name = "my-mystique"')
        assert c.load_policy(toml=text) == "loaded policy my-mystique (0 flows to choose for, 0 pinned)"
        p = c.policy()
        assert (p["name"], p["origin"]) == ("my-mystique", "sent through the operator interface")
        with pytest.raises(OperatorError, match="^policy sent through the operator interface: .*TOML parse error"):
            c.load_policy(toml="[rules\nname = ")
        with pytest.raises(OperatorError, match='^no built-in policy "no-such-policy"; built-in: mystique'):
            c.load_policy("no-such-policy")
        assert c.policy()["name"] == "my-mystique", "a failed load keeps the policy"


def test_a_policy_gives_listed_flows_their_features(agent):
    dp = FakeDatapath(agent.socket)
    try:
        dp.create(sid=1)
        with agent.client() as c:
            c.pin("reno", flow=(1, 1))  # keep the algorithm still while the selector measures
            c.load_policy("mystique")
            for _ in range(3):
                dp.report(sid=1)
            features = only_flow(c)["features"]
            assert features["min_rtt_ms"] == pytest.approx(RTT_US / 1000)
            assert features["samples"] >= 1
    finally:
        dp.close()


def test_bad_requests_get_clear_errors_and_the_connection_goes_on(agent):
    with agent.client() as c:
        with pytest.raises(OperatorError, match="unknown algorithm.*nosuch"):
            c.pin("nosuch", port=80)
        with pytest.raises(OperatorError, match=r"bad prefix \"10.1.2.3/8\": host bits are set \(the network is 10.0.0.0/8\)"):
            c.pin("bbr", prefix="10.1.2.3/8")
        with pytest.raises(OperatorError, match="is not an IPv4 or IPv6 address"):
            c.pin("bbr", prefix="not-an-address/8")
        with pytest.raises(OperatorError, match="only simple algorithms can be pinned"):
            c.pin("reno-datapath", port=80)
        with pytest.raises(OperatorError, match="port 0"):
            c.pin("bbr", port=0)
        assert c.list_pins() == [], "nothing was pinned, and the same connection still works"


def test_python_algorithms_can_be_pinned_and_import_errors_are_reported(agent):
    dp = FakeDatapath(agent.socket)
    try:
        dp.create(sid=2)
        with agent.client() as c:
            assert c.pin("py:ccswitch.authoring.examples.reno:Reno", flow=(1, 2)).startswith("pinned flow 1:2")
            dp.report(sid=2)
            assert only_flow(c)["handovers"] == 1
            with pytest.raises(OperatorError, match="cannot import no_such_module"):
                c.pin("py:no_such_module:Algo", port=80)
            with pytest.raises(OperatorError, match="expected py:MODULE:CLASS"):
                c.pin("py:nocolon", port=80)
    finally:
        dp.close()


def raw_request_with_tag(tag):
    """A framed message whose root struct's union tag is `tag` (one data word, one pointer)."""
    return struct.pack("<IIIIQQ", 0, 3, 0, 1 | 1 << 16, tag, 0)


def test_garbage_on_the_socket_gets_an_error_and_the_agent_stays_up(agent):
    # A framed message with an unknown request: an error, and the connection goes on.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(ANSWER_TIMEOUT_S)
        s.connect(agent.operator_socket)
        s.sendall(raw_request_with_tag(99))
        assert "unknown request (member 99 of the Request union)" in error_text(operator.read_message(s))
        req = operator.schema().Request.new_message()
        req.listPins = None
        s.sendall(req.to_bytes())
        with operator.schema().Response.from_bytes(operator.read_message(s)) as resp:
            assert resp.which() == "pins" and len(resp.pins) == 0
    # Bytes that cannot be a framed message: an error, then the agent closes that connection.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(ANSWER_TIMEOUT_S)
        s.connect(agent.operator_socket)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        text = error_text(operator.read_message(s))
        assert text.startswith("malformed request framing: the segment table announces"), text
        assert s.recv(1) == b"", "closed"
    assert agent.alive()
    with agent.client() as c:
        assert c.list_flows() == []


def error_text(data):
    with operator.schema().Response.from_bytes(data) as resp:
        assert resp.which() == "error", resp.which()
        return resp.error


def cli(agent, *args):
    return subprocess.run([sys.executable, "-m", "ccswitch", "operator", "--socket", agent.operator_socket, *args],
                          capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def test_the_command_line_pins_lists_and_reports_errors(agent):
    dp = FakeDatapath(agent.socket)
    try:
        dp.create(sid=4)
        dp.report(sid=4)
        r = cli(agent, "pin", "bbr", "--port", str(SERVER_PORT))
        assert r.returncode == 0 and r.stdout.strip() == "pinned port 8080 to bbr (1 flow now)", r
        dp.report(sid=4)
        r = cli(agent, "list")
        assert r.returncode == 0, r
        header, row = r.stdout.splitlines()
        assert header.split()[:5] == ["FLOW", "SERVER", "CLIENT", "ALGORITHM", "PINNED"]
        assert row.split()[:5] == ["1:4", f"{SERVER}:{SERVER_PORT}", f"{CLIENT}:{CLIENT_PORT}", "bbr", "bbr"]
        r = cli(agent, "pins")
        assert r.stdout.splitlines()[1].split() == ["port", str(SERVER_PORT), "bbr", "1"], r
        r = cli(agent, "pin", "nosuch", "--prefix", "10.0.0.0/8")
        assert r.returncode == 1 and "unknown algorithm" in r.stderr, r
        r = cli(agent, "unpin", "--flow", "1:4")
        assert r.returncode == 1 and "no pin on flow 1:4" in r.stderr, r
        r = cli(agent, "policy")
        assert r.stdout.startswith("no policy"), r
    finally:
        dp.close()


# The per-destination memory.

# Decides at the second RTT sample; with the fake datapath's 50 ms RTT always for bbr (the
# default). Flows start on cubic.
MEMORY_POLICY = """
name = "memory-test"
initial = "cubic"
default = "bbr"
[window]
kind = "first"
samples = 2
[[rule]]
when = "min_rtt_ms > 1000"
use = "vegas"
"""


@pytest.fixture
def policy_agent(tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(MEMORY_POLICY)
    a = start_agent(tmp_path, "--policy", str(policy))
    yield a
    a.stop()


def decided_flows(dp, c, sids, client):
    """Flows to `client` that the policy decides for (two reports), then close."""
    for sid in sids:
        dp.create(sid, dst=client)
        dp.report(sid)
        dp.report(sid)
        dp.close_flow(sid)
    wait_for(lambda: c.list_flows() == [], "the closed flows leave the list")


def test_the_memory_lists_what_decided_flows_ended_on_and_the_next_flow_starts_there(policy_agent):
    dp = FakeDatapath(policy_agent.socket)
    try:
        with policy_agent.client() as c:
            m = c.memory()
            assert (m["enabled"], m["why"], m["entries"]) == (True, None, [])
            assert m["settings"] == {"prefix_v4": 24, "prefix_v6": 64, "half_life_s": 600.0, "min_score": 1.0,
                                     "capacity": 4096}
            decided_flows(dp, c, [1, 2], "10.20.0.9")
            # A flow that ends before a decision does not vote.
            dp.create(3, dst="10.30.0.1")
            dp.report(3)
            dp.close_flow(3)
            wait_for(lambda: c.list_flows() == [], "flow 3 leaves the list")
            [entry] = c.memory()["entries"]
            assert entry["prefix"] == "10.20.0.0/24"
            assert list(entry["scores"]) == ["bbr"]
            assert 1.99 < entry["scores"]["bbr"] <= 2.0
            assert 0 <= entry["age_s"] < ANSWER_TIMEOUT_S
            # The next flow to that /24 starts on bbr, another on cubic.
            dp.create(4, dst="10.20.0.200")
            dp.create(5, dst="10.21.0.1")
            algorithms = {f["sid"]: f["algorithm"] for f in c.list_flows()}
            assert algorithms == {4: "bbr", 5: "cubic"}, algorithms
            r = cli(policy_agent, "memory")
            assert r.returncode == 0, r
            lines = r.stdout.splitlines()
            assert lines[0] == ("destination memory: on (by /24 (IPv4) and /64 (IPv6) destination prefix, "
                                "half-life 600 s, start at score >= 1, up to 4096 prefixes)"), r.stdout
            assert lines[1].split() == ["PREFIX", "AGE", "SCORES"]
            cells = lines[2].split()
            assert (cells[0], cells[3], float(cells[4])) == ("10.20.0.0/24", "bbr", pytest.approx(2.0, abs=0.01)), r.stdout
            r = cli(policy_agent, "memory", "--json")
            assert json.loads(r.stdout)["entries"][0]["prefix"] == "10.20.0.0/24", r.stdout
    finally:
        dp.close()
    with open(policy_agent.log_path) as f:
        log = f.read()
    assert 'start="memory" start_reason=10.20.0.0/24 remembers bbr' in log, log


def test_the_memory_is_cleared_whole_or_inside_a_prefix(policy_agent):
    dp = FakeDatapath(policy_agent.socket)
    try:
        with policy_agent.client() as c:
            decided_flows(dp, c, [1], "10.20.0.9")
            decided_flows(dp, c, [2], "10.20.1.9")
            decided_flows(dp, c, [3], "192.0.2.1")
            assert [e["prefix"] for e in c.memory()["entries"]] == ["10.20.0.0/24", "10.20.1.0/24", "192.0.2.0/24"]
            assert c.clear_memory("10.20.0.0/16") == "forgot 2 prefixes inside 10.20.0.0/16 (10.20.0.0/24, 10.20.1.0/24)"
            with pytest.raises(OperatorError, match="^the destination memory holds no prefix inside 10.20.0.0/16$"):
                c.clear_memory("10.20.0.0/16")
            with pytest.raises(OperatorError, match="host bits are set"):
                c.clear_memory("10.20.0.1/16")
            r = cli(policy_agent, "memory", "--clear", "10.20.0.1/16")
            assert r.returncode == 2 and "has host bits set" in r.stderr, r
            r = cli(policy_agent, "memory", "--clear")
            assert (r.returncode, r.stdout.strip()) == (0, "forgot all 1 prefix (192.0.2.0/24)"), r
            r = cli(policy_agent, "memory")
            assert r.stdout.splitlines()[1] == "nothing remembered", r.stdout
    finally:
        dp.close()


def test_without_a_policy_the_memory_says_why_it_is_off(agent):
    with agent.client() as c:
        m = c.memory()
        assert (m["enabled"], m["why"]) == (False, "no policy is loaded (flows start on --algorithm)")
    r = cli(agent, "memory")
    assert r.stdout.splitlines()[0] == "destination memory: off: no policy is loaded (flows start on --algorithm)", r


def test_no_destination_memory_switches_it_off_whatever_the_policy(tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(MEMORY_POLICY)
    a = start_agent(tmp_path, "--policy", str(policy), "--no-destination-memory")
    try:
        dp = FakeDatapath(a.socket)
        try:
            with a.client() as c:
                decided_flows(dp, c, [1, 2], "10.20.0.9")
                dp.create(3, dst="10.20.0.10")
                assert only_flow(c)["algorithm"] == "cubic"
                m = c.memory()
                assert (m["enabled"], m["why"], m["entries"]) == (
                    False, "switched off by the agent's --no-destination-memory", [])
        finally:
            dp.close()
    finally:
        a.stop()


# Client-side checks (no agent needed).

def test_the_client_checks_its_arguments_before_sending():
    req = operator.schema().Request.new_message()
    with pytest.raises(ValueError, match="exactly one of flow=, port= and prefix="):
        operator._set_target(req.init("pin").target, (1, 2), 80, None)
    with pytest.raises(ValueError, match="got none"):
        operator._set_target(req.init("unpin"), None, None, None)
    with pytest.raises(ValueError, match="out of range"):
        operator._set_target(req.init("unpin"), None, 70_000, None)
    assert operator.parse_flow("2:17") == (2, 17)
    with pytest.raises(Exception, match="is not DATAPATH:SID"):
        operator.parse_flow("2")


def test_the_flow_table_shows_key_features():
    flows = [{"datapath": 1, "sid": 2, "src": "2001:db8::1", "sport": 443, "dst": "10.0.0.1", "dport": 5000,
              "algorithm": "bbr", "pinned": None, "reports": 7, "handovers": 1, "cwnd_bytes": 28960,
              "features": {"min_rtt_ms": 20.04, "rtt_cov": 0.1234, "loss_rate": 0.015}}]
    header, row = operator.format_flows(flows).splitlines()
    assert header.split() == ["FLOW", "SERVER", "CLIENT", "ALGORITHM", "PINNED", "REPORTS", "HANDOVERS", "CWND",
                              "minRTT", "ms", "RTT", "cov", "loss", "Mbit/s"]
    assert row.split() == ["1:2", "[2001:db8::1]:443", "10.0.0.1:5000", "bbr", "-", "7", "1", "28960",
                           "20.0", "0.12", "1.50%", "-"]
    assert operator.format_flows([]) == "no flows"


# Command-line arguments are checked before anything is sent, with argparse's exit status 2.

@pytest.mark.parametrize("args, message", [
    (["pin", "bbr", "--port", "70000"], "argument --port: 70000 is not a port (ports are 1-65535)"),
    (["pin", "bbr", "--port", "0"], "argument --port: 0 is not a port (ports are 1-65535)"),
    (["unpin", "--port", "http"], "argument --port: 'http' is not a port number (1-65535)"),
    (["pin", "bbr", "--prefix", "10.1.2.3/8"], "argument --prefix: '10.1.2.3/8' is not a prefix: 10.1.2.3/8 has host bits set"),
    (["pin", "bbr", "--prefix", "10.0.0.0/33"], "argument --prefix: '10.0.0.0/33' is not a prefix"),
    (["pin", "bbr", "--flow", "0:1"], "argument --flow: '0:1' is not a flow: DATAPATH counts from 1"),
    (["pin", "bbr", "--flow", "1:4294967296"], "argument --flow: '1:4294967296' is not a flow"),
])
def test_bad_ports_prefixes_and_flows_are_refused_with_exit_status_2(agent, args, message):
    r = cli(agent, *args)
    assert r.returncode == 2, r
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    with agent.client() as c:
        assert c.list_pins() == [], "nothing reached the agent"


def test_valid_edge_ports_and_single_addresses_are_accepted(agent):
    assert cli(agent, "pin", "bbr", "--port", "65535").stdout.strip() == "pinned port 65535 to bbr (0 flows now)"
    r = cli(agent, "pin", "bbr", "--prefix", "2001:db8::1")
    assert r.returncode == 0 and "pinned prefix 2001:db8::1" in r.stdout, r


# Pointed at the datapath socket instead of the operator socket.

def test_the_command_line_names_the_operator_socket_of_the_agent_whose_datapath_socket_it_was_given(agent):
    r = cli_at(agent.socket, "list")
    assert r.returncode == 2, r
    assert r.stderr.strip() == (
        f"ccswitch operator: {agent.socket} is the datapath socket (--socket) of ccswitch-agent pid "
        f"{agent.proc.pid}; use the path given to --operator-socket (this agent's is {agent.operator_socket})"), r.stderr
    with agent.client() as c:
        assert c.list_flows() == []
    with open(agent.log_path) as f:
        assert "datapath connected" not in f.read(), "the command line did not connect to the datapath socket"


def test_the_agent_answers_an_operator_request_on_its_datapath_socket_with_the_socket_to_use(agent):
    # The client library connects wherever it is told; the agent recognises the request.
    agent.wait_datapath_socket()
    with OperatorClient(agent.socket, timeout=ANSWER_TIMEOUT_S) as c:
        with pytest.raises(OperatorError) as e:
            c.list_flows()
    assert "datapath socket (--socket)" in str(e.value), e.value
    assert "use the path given to --operator-socket" in str(e.value), e.value
    assert agent.alive()
    dp = FakeDatapath(agent.socket)  # datapaths are still served
    try:
        dp.create(sid=1)
    finally:
        dp.close()


class FakePeer:
    """A unix socket server that answers each connection with `answer` and closes it."""

    def __init__(self, path, answer):
        import threading
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.srv.settimeout(ANSWER_TIMEOUT_S)
        self.answer = answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.srv.accept()
        except OSError:
            return
        with conn:
            conn.recv(4096)
            conn.sendall(self.answer)

    def close(self):
        self.thread.join(ANSWER_TIMEOUT_S)
        self.srv.close()


def cli_at(path, *args):
    return subprocess.run([sys.executable, "-m", "ccswitch", "operator", "--socket", path, *args],
                          capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


@pytest.mark.parametrize("answer, why", [
    (b"", "the peer closed the connection without answering"),
    (HEADER.pack(INSTALL_EXPR, 64, 0) + bytes(56), "answered with something that is not a Cap'n Proto response"),
])
def test_a_peer_that_does_not_speak_the_operator_protocol_gets_the_socket_hint(tmp_path, answer, why):
    path = str(tmp_path / "other.sock")
    peer = FakePeer(path, answer)
    try:
        r = cli_at(path, "list")
    finally:
        peer.close()
    assert r.returncode == 1, r
    assert why in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith(f"{path}: {operator.DATAPATH_SOCKET_HINT}"), r.stderr
    assert "Traceback" not in r.stderr, r.stderr


def test_the_agent_options_are_read_from_an_agent_and_from_a_kernel_shim_hosting_it():
    assert operator.agent_options(["/x/ccswitch-agent", "--socket", "/s", ""]) == (["--socket", "/s"], False)
    hosted = ["/x/ccswitch-kernel", "--agent-in-process", "--cc-name", "c", "--", "--operator-socket", "/op", ""]
    assert operator.agent_options(hosted) == (["--operator-socket", "/op"], True)
    # a shim reaching its agent over the socket is no agent, whatever follows `--`
    assert operator.agent_options(["/x/ccswitch-kernel", "--agent-socket", "/s"]) is None
    assert operator.agent_options(["/x/ccswitch-kernel", "--", "--agent-in-process"]) is None
    assert operator.agent_options(["/usr/bin/python3", "--agent-in-process", "--"]) is None
