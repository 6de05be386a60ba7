//! Builds `src/bpf/probe.bpf.c` and its libbpf-rs skeleton (datapaths/bpf_build.rs).

include!("../../datapaths/bpf_build.rs");

fn main() {
    build_bpf("probe", &["src/bpf/probe.h"]);
}
