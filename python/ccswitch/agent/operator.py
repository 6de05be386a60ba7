"""Client of the agent's operator interface (`ccswitch-agent --operator-socket PATH`).

The agent listens on a unix stream socket. Each request and each response is one Cap'n
Proto message in the standard stream framing (segment table, then segments); the schema is
the repository's `proto/operator.capnp`, the same file the agent is built from. A connection carries
any number of requests, each answered in order.

    with OperatorClient("/run/ccswitch/operator.sock") as c:
        for f in c.list_flows():
            print(f["sid"], f["algorithm"], f["features"].get("min_rtt_ms"))
        c.pin("bbr", port=443)
        c.load_policy("mystique")
        for e in c.memory()["entries"]:      # the per-destination memory
            print(e["prefix"], e["scores"])
        c.clear_memory("10.0.0.0/8")

Whatever the agent refuses (unknown algorithm, bad prefix, unknown flow, a policy that does
not parse) raises `OperatorError` with the agent's message; the connection stays usable.
`ccswitch operator ...` is the command-line front end.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

#: The operator schema: proto/operator.capnp at the repository's top, which the agent's build
#: (agent/build.rs) compiles too. The package is installed from the source tree (`maturin
#: develop`, scripts/setup.sh), so the file is found relative to it (python/ccswitch/agent/).
SCHEMA_PATH = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir, "proto", "operator.capnp"))
SOCKET_ENV = "CCSWITCH_OPERATOR_SOCKET"
#: Its name before the operator interface was called so; refused with the new one.
OLD_SOCKET_ENV = "CCSWITCH_CONTROL_SOCKET"

BYTES_PER_WORD = 8
# Responses list every flow with its features (about 600 bytes each); this bounds a broken
# or hostile peer, not a real agent.
MAX_RESPONSE_BYTES = 256 << 20
MAX_SEGMENTS = 512
DEFAULT_TRAVERSAL_LIMIT_WORDS = 8 << 20
DEFAULT_TIMEOUT_S = 10.0

_schema = None


def schema():
    """The operator schema, loaded from the package on first use."""
    global _schema
    if _schema is None:
        import capnp  # pycapnp

        _schema = capnp.load(SCHEMA_PATH)
    return _schema


class OperatorError(Exception):
    """The agent refused a request; the message says why."""


#: What to do when the path given is not a operator socket but, most likely, the agent's
#: datapath socket (where CCP datapaths connect).
DATAPATH_SOCKET_HINT = ("this looks like the agent's datapath socket (--socket); "
                        "use the path given to --operator-socket")


class NotAnOperatorSocket(ConnectionError):
    """The peer does not speak the operator protocol: it closed or reset the connection
    without answering, or answered with something that is not a Cap'n Proto response."""


FlowId = Tuple[int, int]


class OperatorClient:
    """One connection to the agent's operator socket."""

    def __init__(self, socket_path: str, timeout: float = DEFAULT_TIMEOUT_S):
        self.socket_path = socket_path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(socket_path)
        except OSError as e:
            self.sock.close()
            raise ConnectionError(
                f"cannot connect to the agent's operator socket {socket_path}: {e.strerror or e} "
                "(is the agent running with --operator-socket?)"
            ) from e

    def __enter__(self) -> "OperatorClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    # Requests

    def list_flows(self) -> List[Dict[str, Any]]:
        """Every flow: datapath, sid, src, sport, dst, dport, algorithm, pinned (None if no
        pin applies), reports, handovers, cwnd_bytes (None before the first report) and
        features (a dict by name, empty while the flow has none)."""
        req = schema().Request.new_message()
        req.listFlows = None
        return self._call(req, "flows", lambda flows: [_flow(f) for f in flows])

    def pin(self, algorithm: str, *, flow: Optional[FlowId] = None, port: Optional[int] = None,
            prefix: Optional[str] = None) -> str:
        """Pin a flow (datapath, sid), a port or a prefix ("10.0.0.0/8", "2001:db8::/32") to
        a simple algorithm spec. Returns the agent's summary."""
        req = schema().Request.new_message()
        p = req.init("pin")
        p.algorithm = algorithm
        _set_target(p.target, flow, port, prefix)
        return self._call(req, "ok", str)

    def unpin(self, *, flow: Optional[FlowId] = None, port: Optional[int] = None,
              prefix: Optional[str] = None) -> str:
        """Remove the pin on exactly that target (OperatorError if there is none)."""
        req = schema().Request.new_message()
        _set_target(req.init("unpin"), flow, port, prefix)
        return self._call(req, "ok", str)

    def list_pins(self) -> List[Dict[str, Any]]:
        """Every pin: kind ("flow", "port" or "prefix"), value ((datapath, sid), a port
        number or a prefix string), algorithm, and flows (how many current flows it covers)."""
        req = schema().Request.new_message()
        req.listPins = None
        return self._call(req, "pins", lambda pins: [_pin(p) for p in pins])

    def load_policy(self, spec: Optional[str] = None, toml: Optional[str] = None) -> str:
        """Load a policy: `spec` is a built-in name, NAME:param=value,... or a TOML path on
        the agent's host; `toml` is a policy file's text. Exactly one of the two."""
        if (spec is None) == (toml is None):
            raise ValueError("load_policy takes exactly one of spec= and toml=")
        req = schema().Request.new_message()
        source = req.init("loadPolicy")
        if spec is not None:
            source.spec = spec
        else:
            source.toml = toml
        return self._call(req, "ok", str)

    def policy(self) -> Optional[Dict[str, str]]:
        """The policy flows follow: name, description, origin (built-in, a path, or sent
        through the operator interface) and summary (its window, decisions and rules); None if
        there is none."""
        req = schema().Request.new_message()
        req.getPolicy = None
        fields = ("name", "description", "origin", "summary")
        return self._call(req, "policy", lambda p: {k: getattr(p, k) for k in fields} if p.loaded else None)

    def memory(self) -> Dict[str, Any]:
        """The per-destination memory: enabled (whether new policy flows start from it and
        closing flows vote), why (None when on, else why it is off), settings (prefix_v4,
        prefix_v6, half_life_s, min_score, capacity: the loaded policy's, the defaults without
        one) and entries, by prefix: prefix ("10.1.2.0/24"), scores (algorithm -> score now,
        highest first) and age_s (since a flow last started or ended there)."""
        req = schema().Request.new_message()
        req.listMemory = None
        return self._call(req, "memory", _memory)

    def clear_memory(self, prefix: Optional[str] = None) -> str:
        """Forget every remembered prefix, or (with `prefix`, e.g. "10.1.0.0/16") those inside
        it; OperatorError if `prefix` covers none. Returns the agent's summary."""
        req = schema().Request.new_message()
        scope = req.init("clearMemory")
        if prefix is None:
            scope.all = None
        else:
            scope.prefix = prefix
        return self._call(req, "ok", str)

    # Transport

    def _call(self, req, expected: str, convert):
        try:
            self.sock.sendall(req.to_bytes())
            data = read_message(self.sock)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise NotAnOperatorSocket(f"{self.socket_path} reset the connection without answering "
                                    f"({e.strerror or e})") from None
        except socket.timeout:
            raise ConnectionError(f"{self.socket_path} did not answer within {self.sock.gettimeout():g} s "
                                  "(is it the agent's --operator-socket?)") from None

        def not_capnp(e: Exception) -> NotAnOperatorSocket:
            return NotAnOperatorSocket(f"{self.socket_path} answered with something that is not a "
                                     f"Cap'n Proto response ({e})")

        # The limit counts words read, repeated reads included; reading a response whole a
        # few times over stays within it.
        limit = max(DEFAULT_TRAVERSAL_LIMIT_WORDS, 4 * len(data) // BYTES_PER_WORD)
        try:
            reader = schema().Response.from_bytes(data, traversal_limit_in_words=limit)
        except Exception as e:  # pycapnp raises its own KjException for undecodable bytes
            raise not_capnp(e) from None
        with reader as resp:
            try:
                which = str(resp.which())
            except Exception as e:
                raise not_capnp(e) from None
            if which == "error":
                raise OperatorError(resp.error)
            if which != expected:
                raise OperatorError(f"the agent answered {which!r} to a request expecting {expected!r}")
            return convert(getattr(resp, expected))


def read_message(sock: socket.socket) -> bytes:
    """One framed Cap'n Proto message from the stream, segment table included."""
    first = _recv_exactly(sock, 4, at_start=True)
    segments = struct.unpack("<I", first)[0] + 1
    if segments > MAX_SEGMENTS:
        raise NotAnOperatorSocket(f"the peer answered with something that is not a Cap'n Proto "
                                f"response (its segment table announces {segments} segments)")
    table_bytes = (4 * (1 + segments) + BYTES_PER_WORD - 1) // BYTES_PER_WORD * BYTES_PER_WORD
    table = first + _recv_exactly(sock, table_bytes - 4)
    words = sum(struct.unpack_from(f"<{segments}I", table, 4))
    total = table_bytes + words * BYTES_PER_WORD
    if total > MAX_RESPONSE_BYTES:
        raise NotAnOperatorSocket(f"the peer answered with something that is not a Cap'n Proto "
                                f"response (it announces {total} bytes)")
    return table + _recv_exactly(sock, total - table_bytes)


def _recv_exactly(sock: socket.socket, n: int, at_start: bool = False) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            if at_start and got == 0:
                raise NotAnOperatorSocket("the peer closed the connection without answering")
            raise ConnectionError("the agent closed the operator connection in the middle of a response")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _set_target(target, flow: Optional[FlowId], port: Optional[int], prefix: Optional[str]) -> None:
    given = [name for name, v in (("flow", flow), ("port", port), ("prefix", prefix)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"give exactly one of flow=, port= and prefix= (got {given or 'none'})")
    if flow is not None:
        datapath, sid = flow
        f = target.init("flow")
        f.datapath, f.sid = int(datapath), int(sid)
    elif port is not None:
        if not 0 <= int(port) <= 0xFFFF:
            raise ValueError(f"port {port} is out of range (1-65535)")
        target.port = int(port)
    else:
        target.prefix = prefix


def _flow(f) -> Dict[str, Any]:
    return {
        "datapath": f.datapath,
        "sid": f.sid,
        "src": f.src,
        "sport": f.sport,
        "dst": f.dst,
        "dport": f.dport,
        "algorithm": f.algorithm,
        "pinned": f.pinned or None,
        "reports": f.reports,
        "handovers": f.handovers,
        "cwnd_bytes": f.cwndBytes or None,
        "features": {x.name: x.value for x in f.features},
    }


def _pin(p) -> Dict[str, Any]:
    kind = str(p.target.which())
    if kind == "flow":
        value: Any = (p.target.flow.datapath, p.target.flow.sid)
    else:
        value = getattr(p.target, kind)
    return {"kind": kind, "value": value, "algorithm": p.algorithm, "flows": p.flows}


def _memory(m) -> Dict[str, Any]:
    return {
        "enabled": m.enabled,
        "why": m.why or None,
        "settings": {"prefix_v4": m.prefixV4, "prefix_v6": m.prefixV6, "half_life_s": m.halfLifeS,
                     "min_score": m.minScore, "capacity": m.capacity},
        "entries": [{"prefix": e.prefix, "scores": {s.algorithm: s.score for s in e.scores}, "age_s": e.ageS}
                    for e in m.entries],
    }


# Command line: `ccswitch operator --socket PATH COMMAND ...`

# Features shown in `ccswitch operator list` (all are in --json).
LIST_FEATURES = [("min_rtt_ms", "minRTT ms", "{:.1f}"), ("rtt_cov", "RTT cov", "{:.2f}"),
                 ("loss_rate", "loss", "{:.2%}"), ("delivery_rate_mbps", "Mbit/s", "{:.2f}")]


MAX_PORT = 0xFFFF
MAX_SID = 0xFFFF_FFFF
MAX_DATAPATH = 0xFFFF_FFFF_FFFF_FFFF


def parse_flow(text: str) -> FlowId:
    """`DATAPATH:SID`, as `ccswitch operator list` prints it."""
    try:
        datapath, sid = (int(x, 10) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not DATAPATH:SID (e.g. 1:3)") from None
    if not 1 <= datapath <= MAX_DATAPATH or not 0 <= sid <= MAX_SID:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a flow: DATAPATH counts from 1 and SID is 0-{MAX_SID} (see `ccswitch operator list`)")
    return datapath, sid


def parse_port(text: str) -> int:
    """A TCP port a flow can use: 1-65535."""
    try:
        port = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-{MAX_PORT})") from None
    if not 1 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a port (ports are 1-{MAX_PORT})")
    return port


def parse_prefix(text: str) -> str:
    """An IPv4 or IPv6 prefix without host bits, or a single address; returned as given (the
    agent parses it again and names it the way it was written)."""
    try:
        ipaddress.ip_network(text, strict=True)
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a prefix: {e} (e.g. 10.0.0.0/8, 2001:db8::/32 or a single address)") from None
    return text


def _agent_args(pid: str) -> Optional[Tuple[List[str], bool]]:
    """The agent's options of process `pid` if it is a ccswitch-agent, or a kernel shim hosting
    the agent (`ccswitch-kernel --agent-in-process ... -- AGENT OPTIONS`), and whether it is
    the latter; else None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0")]
    except OSError:
        return None
    return agent_options(argv)


def agent_options(argv: List[str]) -> Optional[Tuple[List[str], bool]]:
    """`_agent_args` of a command line."""
    if argv and os.path.basename(argv[0]) == "ccswitch-agent":
        return [a for a in argv[1:] if a], False
    if argv and os.path.basename(argv[0]) == "ccswitch-kernel" and "--" in argv:
        shim_args = argv[1:argv.index("--")]
        if "--agent-in-process" in shim_args:
            return [a for a in argv[argv.index("--") + 1:] if a], True
    return None


def _option(args: List[str], name: str) -> Optional[str]:
    """The value of `--name VALUE` or `--name=VALUE` in a clap command line (the last one)."""
    value = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith(name + "="):
            value = a[len(name) + 1:]
    return value


#: `memory --clear` without a prefix (not a string: argparse would run a string through `type`).
CLEAR_ALL = object()

#: The agent's --socket when it is not given (agent/src/main.rs).
AGENT_DEFAULT_SOCKET = "/run/ccswitch/agent.sock"


def running_agents() -> List[Dict[str, Any]]:
    """Every ccswitch-agent process this user can see, and every kernel shim hosting the agent:
    pid, socket and operator_socket (None if it has none; a hosted agent serves --socket only
    when given), as absolute paths."""
    agents = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return agents
    for pid in pids:
        found = _agent_args(pid)
        if found is None:
            continue
        args, in_process = found
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = "/"
        paths = {}
        for key, option, default in (("socket", "--socket", None if in_process else AGENT_DEFAULT_SOCKET),
                                     ("operator_socket", "--operator-socket", None)):
            value = _option(args, option) or default
            paths[key] = os.path.normpath(os.path.join(cwd, value)) if value else None
        agents.append({"pid": int(pid), **paths})
    return agents


def datapath_socket_owner(path: str) -> Optional[Dict[str, Any]]:
    """The running agent whose datapath socket (--socket) is `path`, if any."""
    target = os.path.realpath(path)
    for a in running_agents():
        if a["socket"] is not None and os.path.realpath(a["socket"]) == target:
            return a
    return None


def wrong_socket_message(path: str, agent: Optional[Dict[str, Any]]) -> str:
    """Why `path` is not a operator socket, and which path to use instead."""
    if agent is None:
        return f"{path}: {DATAPATH_SOCKET_HINT}"
    where = (f"this agent's is {agent['operator_socket']}" if agent["operator_socket"]
             else "this agent was started without --operator-socket")
    return (f"{path} is the datapath socket (--socket) of ccswitch-agent pid {agent['pid']}; "
            f"use the path given to --operator-socket ({where})")


def add_cli(sub) -> None:
    p = sub.add_parser("operator", help="talk to a running agent: list flows, pin algorithms, load a policy, "
                                       "see the destination memory")
    p.add_argument("--socket", default=os.environ.get(SOCKET_ENV),
                   help=f"the agent's --operator-socket (default: ${SOCKET_ENV})")
    cmds = p.add_subparsers(dest="operator_command", metavar="COMMAND", required=True)
    c = cmds.add_parser("list", help="flows with their algorithm, pin and key features")
    c.add_argument("--json", action="store_true", help="print JSON (every feature)")
    c = cmds.add_parser("pins", help="the pins in force")
    c.add_argument("--json", action="store_true", help="print JSON")
    c = cmds.add_parser("pin", help="pin a flow, a port or a prefix to an algorithm")
    c.add_argument("algorithm", help="NAME, NAME:PARAM=VALUE,... or py:MODULE:CLASS")
    _add_target_args(c)
    c = cmds.add_parser("unpin", help="remove the pin on a flow, a port or a prefix")
    _add_target_args(c)
    c = cmds.add_parser("load-policy", help="make flows follow a policy")
    src = c.add_mutually_exclusive_group(required=True)
    src.add_argument("spec", nargs="?", help="built-in NAME, NAME:param=value,... or a TOML path on the agent's host")
    src.add_argument("--file", help="a policy TOML file here, sent to the agent as text")
    c = cmds.add_parser("policy", help="the policy flows follow")
    c.add_argument("--json", action="store_true", help="print JSON")
    c = cmds.add_parser("memory", help="the per-destination memory: which algorithm flows to each prefix ended on")
    c.add_argument("--clear", nargs="?", const=CLEAR_ALL, type=parse_prefix, metavar="PREFIX",
                   help="forget everything, or the remembered prefixes inside PREFIX (e.g. 10.1.0.0/16)")
    c.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)


def _add_target_args(p) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--flow", type=parse_flow, metavar="DP:SID", help="one flow (see `list`)")
    g.add_argument("--port", type=parse_port, help="flows from or to this port (1-65535)")
    g.add_argument("--prefix", type=parse_prefix,
                   help="flows from or to this prefix, e.g. 10.0.0.0/8 or 2001:db8::/32 (no host bits), or one address")


def _cli(args) -> int:
    if not args.socket:
        if os.environ.get(OLD_SOCKET_ENV):
            print(f"ccswitch operator: ${OLD_SOCKET_ENV} was renamed: set ${SOCKET_ENV}", file=sys.stderr)
            return 2
        print(f"ccswitch operator: give --socket (or set ${SOCKET_ENV})", file=sys.stderr)
        return 2
    # Connecting to a datapath socket would count as a datapath for that agent: say so first.
    owner = datapath_socket_owner(args.socket)
    if owner is not None:
        print(f"ccswitch operator: {wrong_socket_message(args.socket, owner)}", file=sys.stderr)
        return 2
    try:
        with OperatorClient(args.socket) as c:
            return _run(c, args)
    except NotAnOperatorSocket as e:
        print(f"ccswitch operator: {e}; {wrong_socket_message(args.socket, None)}", file=sys.stderr)
        return 1
    except (OperatorError, ConnectionError, OSError) as e:
        print(f"ccswitch operator: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # arguments the client refuses before sending
        print(f"ccswitch operator: {e}", file=sys.stderr)
        return 2


def _run(c: OperatorClient, args) -> int:
    cmd = args.operator_command
    if cmd == "list":
        flows = c.list_flows()
        print(json.dumps(flows, indent=2) if args.json else format_flows(flows))
    elif cmd == "pins":
        pins = c.list_pins()
        print(json.dumps(pins, indent=2) if args.json else format_pins(pins))
    elif cmd in ("pin", "unpin"):
        target = {"flow": args.flow, "port": args.port, "prefix": args.prefix}
        print(c.pin(args.algorithm, **target) if cmd == "pin" else c.unpin(**target))
    elif cmd == "load-policy":
        if args.file:
            with open(args.file) as f:
                print(c.load_policy(toml=f.read()))
        else:
            print(c.load_policy(spec=args.spec))
    elif cmd == "policy":
        p = c.policy()
        if args.json:
            print(json.dumps(p))
        else:
            print(p["summary"] if p else "no policy: each flow keeps its initial algorithm unless pinned")
    elif cmd == "memory":
        if args.clear is not None:
            print(c.clear_memory(None if args.clear is CLEAR_ALL else args.clear))
        else:
            m = c.memory()
            print(json.dumps(m, indent=2) if args.json else format_memory(m))
    return 0


def _endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def format_flows(flows: List[Dict[str, Any]]) -> str:
    if not flows:
        return "no flows"
    header = ["FLOW", "SERVER", "CLIENT", "ALGORITHM", "PINNED", "REPORTS", "HANDOVERS", "CWND"]
    header += [title for _, title, _ in LIST_FEATURES]
    rows = []
    for f in flows:
        row = [f"{f['datapath']}:{f['sid']}", _endpoint(f["src"], f["sport"]), _endpoint(f["dst"], f["dport"]),
               f["algorithm"], f["pinned"] or "-", str(f["reports"]), str(f["handovers"]),
               str(f["cwnd_bytes"]) if f["cwnd_bytes"] is not None else "-"]
        for name, _, fmt in LIST_FEATURES:
            v = f["features"].get(name)
            row.append(fmt.format(v) if v is not None else "-")
        rows.append(row)
    return _table(header, rows)


def format_pins(pins: List[Dict[str, Any]]) -> str:
    if not pins:
        return "no pins"
    rows = []
    for p in pins:
        value = "{}:{}".format(*p["value"]) if p["kind"] == "flow" else str(p["value"])
        rows.append([f"{p['kind']} {value}", p["algorithm"], str(p["flows"])])
    return _table(["TARGET", "ALGORITHM", "FLOWS"], rows)


def format_memory(m: Dict[str, Any]) -> str:
    s = m["settings"]
    settings = (f"by /{s['prefix_v4']} (IPv4) and /{s['prefix_v6']} (IPv6) destination prefix, "
                f"half-life {s['half_life_s']:g} s, start at score >= {s['min_score']:g}, "
                f"up to {s['capacity']} prefixes")
    state = f"on ({settings})" if m["enabled"] else f"off: {m['why']}"
    lines = [f"destination memory: {state}"]
    if not m["entries"]:
        lines.append("nothing remembered")
    else:
        rows = [[e["prefix"], f"{e['age_s']:.1f} s",
                 ", ".join(f"{a} {v:.2f}" for a, v in e["scores"].items())] for e in m["entries"]]
        lines.append(_table(["PREFIX", "AGE", "SCORES"], rows))
    return "\n".join(lines)


def _table(header: List[str], rows: List[List[str]]) -> str:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines)
