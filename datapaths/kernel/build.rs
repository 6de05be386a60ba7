//! Builds `src/bpf/kernel.bpf.c` and its libbpf-rs skeleton (datapaths/bpf_build.rs).

include!("../bpf_build.rs");

fn main() {
    build_bpf("kernel", &["src/bpf/kernel.h", "src/bpf/vm.bpf.h"]);
}
