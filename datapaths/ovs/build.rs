//! Compiles `src/bpf/ovs.bpf.c` (clang -target bpf, CO-RE) and generates the libbpf-rs
//! skeleton into OUT_DIR, the same way as `datapaths/kernel/build.rs`: `vmlinux.h` comes from
//! the running kernel's BTF at build time (never committed), or from `CCSWITCH_VMLINUX_H`.

use std::env;
use std::path::PathBuf;

include!("../vmlinux_h.rs");

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("src/bpf");
    for f in ["ovs.bpf.c", "ovs.h"] {
        println!("cargo:rerun-if-changed=src/bpf/{f}");
    }
    write_vmlinux_h(&out);

    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("aarch64") => "arm64",
        _ => "x86",
    };
    libbpf_cargo::SkeletonBuilder::new()
        .source(bpf_dir.join("ovs.bpf.c"))
        .obj(out.join("ovs.bpf.o"))
        .clang_args([
            "-O2".to_string(),
            "-g".to_string(),
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", out.display()),
            format!("-I{}", bpf_dir.display()),
        ])
        .build_and_generate(out.join("ovs.skel.rs"))
        .expect("compiling ovs.bpf.c / generating the skeleton");
}
