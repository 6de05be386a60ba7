"""Dump a BPF program's JIT image and its JIT-offset -> line_info mapping (bpftool here has no libbfd)."""
import ctypes, struct, sys, json
libc = ctypes.CDLL(None, use_errno=True)
SYS_bpf = 321
BPF_PROG_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD = 13, 15
def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    r = libc.syscall(SYS_bpf, cmd, buf, 128)
    if r < 0: raise OSError(ctypes.get_errno(), f"bpf cmd {cmd}")
    return r, buf
pid = int(sys.argv[1]); out = sys.argv[2]
fd, _ = bpf(BPF_PROG_GET_FD_BY_ID, struct.pack("I", pid))
def info(infobuf):
    attr = struct.pack("IIQ", fd, len(infobuf), ctypes.addressof(infobuf))
    bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
    return infobuf
raw = info(ctypes.create_string_buffer(256))
u32 = lambda o: struct.unpack_from("I", raw, o)[0]
jlen, nksyms, nline, njline = u32(16), u32(104), u32(148), u32(168)
lrec, jlrec = u32(172), u32(176)
code = ctypes.create_string_buffer(jlen); ksyms = ctypes.create_string_buffer(8 * nksyms)
lines = ctypes.create_string_buffer(lrec * nline); jlines = ctypes.create_string_buffer(jlrec * njline)
req = ctypes.create_string_buffer(256)
struct.pack_into("I", req, 16, jlen); struct.pack_into("Q", req, 24, ctypes.addressof(code))
struct.pack_into("I", req, 104, nksyms); struct.pack_into("Q", req, 112, ctypes.addressof(ksyms))
struct.pack_into("I", req, 148, nline); struct.pack_into("Q", req, 152, ctypes.addressof(lines))
struct.pack_into("Q", req, 160, ctypes.addressof(jlines)); struct.pack_into("I", req, 168, njline)
struct.pack_into("I", req, 172, lrec); struct.pack_into("I", req, 176, jlrec)
info(req)
open(out + ".bin", "wb").write(code.raw)
base = struct.unpack_from("Q", ksyms, 0)[0]
rows = []
for i in range(njline):
    addr = struct.unpack_from("Q", jlines, i * jlrec)[0]
    insn_off, fname, line_off, line_col = struct.unpack_from("IIII", lines, i * lrec)
    rows.append({"jit_off": addr - base, "insn": insn_off, "line": line_col >> 10})
json.dump({"ksym": base, "len": jlen, "lines": rows}, open(out + ".json", "w"))
print(jlen, nksyms, nline, njline)
