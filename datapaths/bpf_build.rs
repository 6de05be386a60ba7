// The recipe every BPF program of this repository is built with, `include!`d by the build
// scripts of datapaths/kernel, datapaths/ovs and tools/probe: `build_bpf("NAME", headers)`
// compiles `src/bpf/NAME.bpf.c` with clang (-target bpf, -O2, -mcpu=v3, CO-RE) and generates
// the libbpf-rs skeleton `NAME.skel.rs` into OUT_DIR. Headers shared by the datapaths'
// programs live in `datapaths/bpf/` (on the include path; list those a program uses in
// `headers`, relative to its crate, so that a change rebuilds it).
//
// `vmlinux.h` is produced at build time from the running kernel's BTF (`bpftool btf dump file
// /sys/kernel/btf/vmlinux format c`) into OUT_DIR and never committed; CCSWITCH_VMLINUX_H names
// a pre-generated header instead (e.g. on a build host without BTF). Needs clang (>= 14),
// bpftool, libelf and zlib development files.

fn build_bpf(name: &str, headers: &[&str]) {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let manifest = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let bpf_dir = manifest.join("src/bpf");
    let source = format!("src/bpf/{name}.bpf.c");
    for f in std::iter::once(source.as_str()).chain(headers.iter().copied()) {
        println!("cargo:rerun-if-changed={f}");
    }
    write_vmlinux_h(&manifest, &out);
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") | Err(_) => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("unsupported target arch {other}"),
    };
    libbpf_cargo::SkeletonBuilder::new()
        .source(manifest.join(&source))
        .obj(out.join(format!("{name}.bpf.o")))
        .clang_args([
            "-O2".to_string(),
            "-g".to_string(),
            "-mcpu=v3".to_string(),
            format!("-D__TARGET_ARCH_{arch}"),
            format!("-I{}", out.display()),
            format!("-I{}", bpf_dir.display()),
            format!("-I{}", shared_bpf_dir(&manifest).display()),
        ])
        .build_and_generate(out.join(format!("{name}.skel.rs")))
        .unwrap_or_else(|e| panic!("compiling {source} / generating the skeleton: {e:#}"));
}

/// `datapaths/bpf`: the BPF headers the datapaths share (found from the including crate
/// upwards, as `write_vmlinux_h` finds this file).
fn shared_bpf_dir(manifest: &std::path::Path) -> std::path::PathBuf {
    manifest
        .ancestors()
        .map(|d| d.join("datapaths/bpf"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| manifest.join("src/bpf"))
}

fn write_vmlinux_h(manifest: &std::path::Path, out: &std::path::Path) {
    println!("cargo:rerun-if-env-changed=CCSWITCH_VMLINUX_H");
    // this file, found from the including crate upwards (its relative path differs per crate;
    // a path that does not exist would make cargo rerun the build script every time)
    if let Some(me) = manifest.ancestors().map(|d| d.join("datapaths/bpf_build.rs")).find(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", me.display());
    }
    let vmlinux = out.join("vmlinux.h");
    if let Some(given) = std::env::var_os("CCSWITCH_VMLINUX_H") {
        std::fs::copy(&given, &vmlinux).expect("copy CCSWITCH_VMLINUX_H");
        return;
    }
    let dump = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"])
        .output()
        .unwrap_or_else(|e| panic!("running bpftool to generate vmlinux.h failed ({e}); install bpftool"));
    assert!(dump.status.success(), "bpftool btf dump failed: {}", String::from_utf8_lossy(&dump.stderr));
    std::fs::write(&vmlinux, &dump.stdout).expect("write vmlinux.h");
}
