#!/usr/bin/env python3
"""Whether the shipped flash attention configurations compile to the same machine code from two
source trees (before and after a kernel change), so that their database rows may be re-hashed
instead of re-tuned (db/shipped/README.md).

For every row of the database's `best` and `trials` tables of op flash_attention, the kernel's
NVRTC name expression (as FlashAttentionOp::kernels() writes it, variants and VARLEN off;
flash_attention_fwd for impl=0 rows, flash_attention_sm90 for impl=1) is compiled for each
--arch from each tree's templates/ folder, with the options of runtime/core/compiler.cpp,
and the `.text` sections of the two cubins are compared byte for byte. Exit 0 when every pair is
identical, 1 otherwise. No GPU needed, only libnvrtc.

    git show HEAD:templates/attention/flash_attention.cuh > /tmp/before/templates/attention/...
    scripts/same_machine_code.py --before /tmp/before/templates --after templates
"""
import argparse
import ctypes
import ctypes.util
import os
import sqlite3
import struct
import sys

NVRTC_CANDIDATES = ["libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"]


def load_nvrtc():
    for name in [ctypes.util.find_library("nvrtc")] + NVRTC_CANDIDATES:
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    sys.exit("libnvrtc not found (tried " + ", ".join(NVRTC_CANDIDATES) + ")")


def compile_cubin(nvrtc, include_dir, expression, arch):
    """(cubin bytes, lowered name) of `expression` from attention/flash_attention.cuh or
    attention/flash_attention_sm90.cuh."""
    prog = ctypes.c_void_p()
    src = (b'#include "attention/flash_attention.cuh"\n'
           b'#include "attention/flash_attention_sm90.cuh"\n')
    check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"same_machine_code.cu", 0,
                                          None, None), "create")
    check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expression.encode()), "name expression")
    options = ["--gpu-architecture=" + arch, "-std=c++17", "-DKTUNE_NVRTC=1",
               "-I" + include_dir]
    opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    result = nvrtc.nvrtcCompileProgram(prog, len(options), opts)
    if result != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        sys.exit(f"{expression} for {arch} from {include_dir} does not compile:\n"
                 + log.value.decode(errors="replace"))
    size = ctypes.c_size_t()
    check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "cubin size")
    cubin = ctypes.create_string_buffer(size.value)
    check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
    lowered = ctypes.c_char_p()
    check(nvrtc, nvrtc.nvrtcGetLoweredName(prog, expression.encode(), ctypes.byref(lowered)),
          "lowered name")
    name = lowered.value.decode()
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin.raw, name


def check(nvrtc, result, what):
    if result != 0:
        nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        sys.exit(f"nvrtc {what}: {nvrtc.nvrtcGetErrorString(result).decode()}")


def text_sections(elf):
    """{section name: bytes} of the ELF64 little-endian file's sections named .text*."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        sys.exit("cubin is not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = []
    for i in range(shnum):
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        headers.append((name, offset, size))
    strtab = headers[shstrndx]
    out = {}
    for name, offset, size in headers:
        start = strtab[1] + name
        label = elf[start:elf.index(b"\0", start)].decode()
        if label.startswith(".text"):
            out[label] = elf[offset:offset + size]
    return out


def expression(row):
    """FlashAttentionOp::kernels()'s name expression for one `best` row (variants off)."""
    dtype, problem_key, params_key = row
    problem = dict(item.split("=") for item in problem_key.split(","))
    params = dict(item.split("=") for item in params_key.split(","))
    for dim in ("window", "softcap", "alibi", "varlen"):
        if problem.get(dim, "0") not in ("0", "no"):
            sys.exit(f"row {problem_key} has {dim} on: this script compares the plain kernel")
    boolean = lambda v: "true" if v in ("1", "yes") else "false"
    t = "ktune::bf16" if dtype == "bf16" else "ktune::fp16"
    if params.get("impl", "0") == "1":
        # The wgmma kernel: block_m / 64 consumers; pingpong and persistent left out of keys at 0.
        consumers = int(params["block_m"]) // 64
        return (f"ktune::flash_attention_sm90<{t}, {problem['d']}, {params['block_n']}, "
                f"{consumers}, {params['stages']}, {boolean(params.get('pingpong', '0'))}, "
                f"{boolean(problem['causal'])}, false, false, false"
                f"{', true' if params.get('persistent', '0') == '1' else ''}>")
    return (f"ktune::flash_attention_fwd<{t}, {problem['d']}, {params['block_m']}, "
            f"{params['block_n']}, {params['warps']}, {params['stages']}, "
            f"{boolean(problem['causal'])}, {boolean(params['q_regs'])}, 1, "
            f"{boolean(params['smem_pad'])}, false, false, false>")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="templates/ folder of the old sources")
    ap.add_argument("--after", required=True, help="templates/ folder of the new sources")
    ap.add_argument("--db", default="db/shipped/h100.db")
    ap.add_argument("--arch", action="append", help="default: sm_90a and sm_80")
    args = ap.parse_args()
    archs = args.arch or ["sm_90a", "sm_80"]
    for d in (args.before, args.after):
        if not os.path.isfile(os.path.join(d, "attention", "flash_attention.cuh")):
            sys.exit(f"{d} holds no attention/flash_attention.cuh")
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    # The best rows and the trials the file ships with them (the defaults' trials too).
    rows = db.execute("SELECT dtype, problem_key, params_key FROM best "
                      "WHERE op = 'flash_attention' UNION SELECT dtype, problem_key, params_key "
                      "FROM trials WHERE op = 'flash_attention' ORDER BY 2, 3").fetchall()
    if not rows:
        sys.exit(f"{args.db} has no flash_attention rows")
    nvrtc = load_nvrtc()
    same = total = renamed = 0
    for row in rows:
        expr = expression(row)
        for arch in archs:
            before, name_before = compile_cubin(nvrtc, args.before, expr, arch)
            after, name_after = compile_cubin(nvrtc, args.after, expr, arch)
            tb, ta = text_sections(before), text_sections(after)
            # Section names carry the mangled kernel name, which may change (a new defaulted
            # template parameter): compare the code in order.
            code_b = [tb[k] for k in sorted(tb)]
            code_a = [ta[k] for k in sorted(ta)]
            equal = len(code_b) == len(code_a) and all(x == y for x, y in zip(code_b, code_a))
            total += 1
            same += equal
            renamed += name_before != name_after
            print(f"{'same' if equal else 'DIFFERENT'} {arch:6} {row[1]} {row[2]}: "
                  f".text {sum(map(len, code_b))} / {sum(map(len, code_a))} bytes")
    print(f"{same} of {total} .text identical ({renamed} with another mangled name)")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
