//! Compiles `src/bpf/probe.bpf.c` with clang (-target bpf, CO-RE) and generates the libbpf-rs
//! skeleton into OUT_DIR, as datapaths/kernel/build.rs does (same `vmlinux.h` recipe, shared
//! through `datapaths/vmlinux_h.rs`; set CCSWITCH_VMLINUX_H to use a pre-generated header).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/probe.bpf.c";
const HDR: &str = "src/bpf/probe.h";

include!("../../datapaths/vmlinux_h.rs");

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={HDR}");
    write_vmlinux_h(&out);

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") | Err(_) => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("unsupported target arch {other}"),
    };
    SkeletonBuilder::new()
        .source(manifest.join(SRC))
        .obj(out.join("probe.bpf.o"))
        .clang_args([
            "-O2".to_string(),
            "-g".to_string(),
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", out.display()),
            format!("-I{}", manifest.join("src/bpf").display()),
        ])
        .build_and_generate(out.join("probe.skel.rs"))
        .expect("compiling probe.bpf.c / generating the skeleton");
}
