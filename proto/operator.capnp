# The ccswitch agent's operator interface (`ccswitch-agent --operator-socket PATH`).
#
# One schema, two users: the agent's build script compiles this file (agent/build.rs) and
# the Python client (ccswitch.agent.operator) loads it from proto/ at run time.
#
# Transport: a unix stream socket. The client sends a Request, the agent answers with one
# Response, and the connection stays open for the next request. Each message is framed the
# standard Cap'n Proto way (a segment table, then the segments, unpacked). The agent accepts
# requests of at most 1 MiB; a request that is framed correctly but not a valid Request gets
# Response.error and the connection goes on; a broken framing gets Response.error and the
# agent closes that connection.
#
# Compatibility: fields and union members are only ever added, never renumbered, so old
# clients keep working against new agents. A request member an agent does not know is
# answered with Response.error naming it.

@0xaf3cae6ae352b709;

struct Request {
  union {
    listFlows @0 :Void;         # -> flows
    pin @1 :Pin;                # -> ok
    unpin @2 :Target;           # -> ok
    loadPolicy @3 :PolicySource; # -> ok
    listPins @4 :Void;          # -> pins
    getPolicy @5 :Void;         # -> policy
    listMemory @6 :Void;        # -> memory
    clearMemory @7 :MemoryScope; # -> ok
  }
}

# A flow as the agent numbers it: datapaths are 1, 2, ... in connection order, and `sid` is
# the datapath's socket id for the flow.
struct FlowId {
  datapath @0 :UInt64;
  sid @1 :UInt32;
}

# What a pin applies to. For a flow, the most specific pin wins: a flow pin, then a port pin
# (the server's port before the client's), then the longest matching prefix (the client's
# address before the server's).
struct Target {
  union {
    flow @0 :FlowId;
    port @1 :UInt16;      # matches a flow's source or destination port
    prefix @2 :Text;      # "10.0.0.0/8", "2001:db8::/32" or a single address
  }
}

struct Pin {
  target @0 :Target;
  # A simple algorithm spec: NAME, NAME:PARAM=VALUE,... or py:MODULE:CLASS.
  algorithm @1 :Text;
}

struct PolicySource {
  union {
    spec @0 :Text;   # a built-in NAME, NAME:param=value,..., or a TOML file path on the agent's host
    toml @1 :Text;   # the policy file's text itself
  }
}

struct Response {
  union {
    error @0 :Text;              # what was wrong with the request
    ok @1 :Text;                 # a one-line summary of what was done
    flows @2 :List(FlowInfo);
    pins @3 :List(PinInfo);
    policy @4 :PolicyInfo;
    memory @5 :MemoryInfo;
  }
}

struct FlowInfo {
  datapath @0 :UInt64;
  sid @1 :UInt32;
  # Addresses as text ("10.0.0.1" or "2001:db8::1"); src/sport are the sender's side.
  src @2 :Text;
  sport @3 :UInt16;
  dst @4 :Text;
  dport @5 :UInt16;
  algorithm @6 :Text;          # the algorithm running now
  pinned @7 :Text;             # the algorithm a pin holds the flow to; empty if none
  reports @8 :UInt64;
  handovers @9 :UInt32;
  cwndBytes @10 :UInt64;       # 0 until the first report
  # The selector's features, by name (see the agent's selector); empty while the flow has
  # none. A list of pairs, so that new features need no schema change.
  features @11 :List(Feature);
}

struct Feature {
  name @0 :Text;
  value @1 :Float64;
}

struct PinInfo {
  target @0 :Target;
  algorithm @1 :Text;
  flows @2 :UInt32;            # current flows the pin's target matches
}

struct PolicyInfo {
  loaded @0 :Bool;             # false: no policy, each flow keeps its initial algorithm
  name @1 :Text;
  description @2 :Text;
  origin @3 :Text;             # where it was loaded from: built-in, a path, or the operator interface
  summary @4 :Text;            # human-readable: window, decisions, initial algorithm, rules
}

# Which remembered prefixes to forget.
struct MemoryScope {
  union {
    all @0 :Void;
    prefix @1 :Text;      # every remembered prefix inside this one ("10.0.0.0/8"; no host bits)
  }
}

# The per-destination memory: for each destination prefix, per algorithm, a decayed count of
# the flows to it that ended on that algorithm after a decision. A new policy flow starts on
# the top algorithm of its prefix when that score is at least minScore.
struct MemoryInfo {
  enabled @0 :Bool;            # whether new flows start from it and closing flows vote
  why @1 :Text;                # why it is off; empty when on
  # The settings in force (the policy's [memory]; the defaults when no policy is loaded).
  prefixV4 @2 :UInt8;
  prefixV6 @3 :UInt8;
  halfLifeS @4 :Float64;
  minScore @5 :Float64;
  capacity @6 :UInt32;
  entries @7 :List(MemoryEntry);  # ordered by prefix
}

struct MemoryEntry {
  prefix @0 :Text;             # "10.1.2.0/24"
  scores @1 :List(AlgorithmScore);  # decayed to now, highest first
  ageS @2 :Float64;            # seconds since a flow last started or ended there
}

struct AlgorithmScore {
  algorithm @0 :Text;          # an algorithm spec, as the policy names it
  score @1 :Float64;
}
