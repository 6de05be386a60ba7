/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Layouts shared by probe.bpf.c and the Rust loader (src/abi.rs mirrors every struct here and
 * asserts the same sizes). Addresses and ports are kept in network byte order, as they sit in
 * the packet; the loader converts them for its JSON.
 */
#ifndef CCSWITCH_PROBE_H
#define CCSWITCH_PROBE_H

/* Most segments of one GSO super-packet whose ends are stamped (64 KiB / 1 KiB MSS). */
#define PROBE_MAX_GSO_SEGS 64

/* probe_record.flags */
#define PROBE_MATCHED 1u

/* A (server address, server port) whose data segments are measured: the `probe_endpoints` set. */
struct probe_endpoint {
	__u32 ip;   /* network order */
	__u16 port; /* network order */
	__u16 _pad;
};

/* One TCP connection, named the same way at both ends of the emulated path (mahimahi NATs the
 * client address, but keeps the server's address and port and the client's port). */
struct probe_flow_key {
	__u32 server_ip;    /* network order */
	__u16 server_port;  /* network order */
	__u16 client_port;  /* network order */
};

/* One data segment in flight: its flow and the sequence number just past its payload. */
struct probe_segment_key {
	struct probe_flow_key flow;
	__u32 seq_end; /* host order */
};

/* Per-flow counters (`probe_flows`). `flow` is a small index assigned in BPF on the flow's first
 * packet (1, 2, 3, ...): the `flow` of the ring records and of the JSON. */
struct probe_flow {
	__u32 flow;
	__u32 _pad;
	__u64 segments_sent;     /* at the server's egress, GSO segments counted one by one */
	__u64 bytes_sent;        /* payload, retransmissions included */
	__u64 segments_received; /* at the client's ingress */
	__u64 bytes_received;
	__u64 unmatched;         /* received segments without a stamp from the egress */
	__u64 first_sent_ns;     /* CLOCK_MONOTONIC */
	__u64 last_received_ns;
};

/* One received data segment: the ring record, written as is to OUT.packets.bin. */
struct probe_record {
	__u64 t_ns;   /* arrival at the client's ingress, CLOCK_MONOTONIC */
	__u32 owd_us; /* sender egress -> receiver ingress; 0 unless flags & PROBE_MATCHED */
	__u32 flow;
	__u32 bytes;  /* TCP payload */
	__u32 flags;
};

/* The server socket's own counters (what `ss -ti` shows), the latest snapshot taken at a state
 * change once the connection left ESTABLISHED (`probe_tcp_infos`, keyed like the flows). */
struct probe_tcp_info {
	__u32 state; /* the new state: TCP_* of include/net/tcp_states.h */
	__u32 total_retrans;
	__u64 bytes_retrans;
	__u32 srtt_us;    /* smoothed RTT, microseconds (tcp_sock.srtt_us >> 3) */
	__u32 min_rtt_us; /* the windowed minimum RTT, microseconds */
	__u32 data_segs_out;
	__u32 delivered;
	__u64 bytes_acked;
	__u64 snapshot_ns;
};

/* Counters of the probe itself (`.bss`). */
struct probe_counters {
	__u64 records;      /* ring records submitted */
	__u64 ring_dropped; /* records lost to a full ring */
	__u64 stamps_lost;  /* egress segments whose stamp could not be stored */
	__u64 flows_lost;   /* data segments of a flow the full `probe_flows` had no room for */
};

_Static_assert(sizeof(struct probe_endpoint) == 8, "probe_endpoint layout");
_Static_assert(sizeof(struct probe_flow_key) == 8, "probe_flow_key layout");
_Static_assert(sizeof(struct probe_segment_key) == 12, "probe_segment_key layout");
_Static_assert(sizeof(struct probe_flow) == 64, "probe_flow layout");
_Static_assert(sizeof(struct probe_record) == 24, "probe_record layout");
_Static_assert(sizeof(struct probe_tcp_info) == 48, "probe_tcp_info layout");
_Static_assert(sizeof(struct probe_counters) == 32, "probe_counters layout");

#endif
