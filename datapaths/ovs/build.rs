//! Builds `src/bpf/ovs.bpf.c` and its libbpf-rs skeleton (datapaths/bpf_build.rs).

include!("../bpf_build.rs");

fn main() {
    build_bpf("ovs", &["src/bpf/ovs.h", "../bpf/std_fold.bpf.h", "../bpf/shim_channel.bpf.h"]);
}
