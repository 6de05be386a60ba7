//! Compiles `src/bpf/switch.bpf.c` (clang -target bpf, CO-RE) and generates the libbpf-rs
//! skeleton into OUT_DIR, the same way as `datapaths/kernel/build.rs`: `vmlinux.h` comes from
//! the running kernel's BTF at build time (never committed), or from `CCSWITCH_VMLINUX_H`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("src/bpf");
    for f in ["switch.bpf.c", "switch.h"] {
        println!("cargo:rerun-if-changed=src/bpf/{f}");
    }
    println!("cargo:rerun-if-env-changed=CCSWITCH_VMLINUX_H");

    let vmlinux = out.join("vmlinux.h");
    if let Some(given) = env::var_os("CCSWITCH_VMLINUX_H") {
        std::fs::copy(&given, &vmlinux).expect("copy CCSWITCH_VMLINUX_H");
    } else {
        let dump = Command::new("bpftool")
            .args([
                "btf",
                "dump",
                "file",
                "/sys/kernel/btf/vmlinux",
                "format",
                "c",
            ])
            .output()
            .unwrap_or_else(|e| panic!("running bpftool to generate vmlinux.h failed ({e})"));
        assert!(
            dump.status.success(),
            "bpftool btf dump: {}",
            String::from_utf8_lossy(&dump.stderr)
        );
        std::fs::write(&vmlinux, &dump.stdout).expect("write vmlinux.h");
    }

    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("aarch64") => "arm64",
        _ => "x86",
    };
    libbpf_cargo::SkeletonBuilder::new()
        .source(bpf_dir.join("switch.bpf.c"))
        .obj(out.join("switch.bpf.o"))
        .clang_args([
            "-O2".to_string(),
            "-g".to_string(),
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", out.display()),
            format!("-I{}", bpf_dir.display()),
        ])
        .build_and_generate(out.join("switch.skel.rs"))
        .expect("compiling switch.bpf.c / generating the skeleton");
}
