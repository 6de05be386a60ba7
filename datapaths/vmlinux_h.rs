// Shared by the datapaths' build scripts (`include!`d): writes `vmlinux.h` into `out`, from
// the running kernel's BTF (`bpftool btf dump file /sys/kernel/btf/vmlinux format c`) or from
// the file named by CCSWITCH_VMLINUX_H (e.g. on a build host without BTF). Never committed.
fn write_vmlinux_h(out: &std::path::Path) -> std::path::PathBuf {
    println!("cargo:rerun-if-env-changed=CCSWITCH_VMLINUX_H");
    // this file, found from the including crate upwards (its relative path differs per crate;
    // a path that does not exist would make cargo rerun the build script every time)
    let manifest = std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    if let Some(me) = manifest.ancestors().map(|d| d.join("datapaths/vmlinux_h.rs")).find(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", me.display());
    }
    let vmlinux = out.join("vmlinux.h");
    if let Some(given) = std::env::var_os("CCSWITCH_VMLINUX_H") {
        std::fs::copy(&given, &vmlinux).expect("copy CCSWITCH_VMLINUX_H");
        return vmlinux;
    }
    let dump = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"])
        .output()
        .unwrap_or_else(|e| panic!("running bpftool to generate vmlinux.h failed ({e}); install bpftool"));
    assert!(dump.status.success(), "bpftool btf dump failed: {}", String::from_utf8_lossy(&dump.stderr));
    std::fs::write(&vmlinux, &dump.stdout).expect("write vmlinux.h");
    vmlinux
}
