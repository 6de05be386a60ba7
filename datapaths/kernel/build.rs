//! Compiles `src/bpf/kernel.bpf.c` with clang (-target bpf, CO-RE) and
//! generates the libbpf-rs skeleton into OUT_DIR.
//!
//! `vmlinux.h` is produced at build time from the running kernel's BTF
//! (`bpftool btf dump file /sys/kernel/btf/vmlinux format c`) into OUT_DIR;
//! it is never committed. Set `CCSWITCH_VMLINUX_H=/path/vmlinux.h` to use a
//! pre-generated header instead (e.g. on a build host without BTF).
//! Needs: clang (>= 14), bpftool, libelf and zlib development files.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/kernel.bpf.c";
const HDR: &str = "src/bpf/kernel.h";
const VM: &str = "src/bpf/vm.bpf.h";

include!("../vmlinux_h.rs");

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));

    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed={HDR}");
    println!("cargo:rerun-if-changed={VM}");

    write_vmlinux_h(&out);

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let skel = out.join("kernel.skel.rs");
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("unsupported target arch {other}"),
        Err(_) => "x86",
    };
    SkeletonBuilder::new()
        .source(manifest.join(SRC))
        .obj(out.join("kernel.bpf.o"))
        .clang_args([
            "-O2".to_string(),
            "-g".to_string(),
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", out.display()),
            format!("-I{}", manifest.join("src/bpf").display()),
        ])
        .build_and_generate(&skel)
        .expect("compiling kernel.bpf.c / generating the skeleton");
}
