//! Builds `src/bpf/kernel.bpf.c` and `src/bpf/floor.bpf.c` with their libbpf-rs skeletons (datapaths/bpf_build.rs), and
//! records the directory of the libpython that the in-process agent links as the binary's
//! rpath (as the agent's own build does), so that it loads the interpreter it was built against.

include!("../bpf_build.rs");

fn main() {
    if let Some(dir) = &pyo3_build_config::get().lib_dir {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    build_bpf("kernel", &["src/bpf/kernel.h", "src/bpf/vm.bpf.h", "../bpf/std_fold.bpf.h", "../bpf/shim_channel.bpf.h"]);
    build_bpf("floor", &[]);
}
