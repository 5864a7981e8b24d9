#!/usr/bin/env python3
"""Whether the configurations of a tuning database compile to the same machine code from two
source trees (before and after a kernel change), so that their rows may be re-hashed instead of
re-tuned (db/shipped/README.md).

`ktune db kernels --json` (of the build that has the new sources) lists each configuration of
the database's best rows and ok trials with the kernels it compiles to: the header and the NVRTC
name expression, as the op's kernels() writes them. Each kernel is compiled from each tree's
templates/ folder for the row's target (and each --arch), with the options of
runtime/core/compiler.cpp, and the `.text` sections of the two cubins are compared byte for
byte. Exit 0 when every pair is identical, 1 otherwise. No GPU needed, only libnvrtc.

With --rehash, the rows (best and trials) of each op whose every configuration compiled to the
same code get the op's current template hash in the database; an op with any difference, or any
configuration that could not be compared, keeps its hash (its rows stay stale: re-tune them).

    mkdir -p /tmp/before && git archive HEAD templates | tar -x -C /tmp/before
    scripts/same_machine_code.py --before /tmp/before/templates --after templates \\
        --db db/shipped/h200.db [--op moe] [--rehash]
"""
import argparse
import collections
import ctypes
import ctypes.util
import json
import os
import sqlite3
import struct
import subprocess
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


class CompileFailure(Exception):
    pass


def compile_cubin(nvrtc, include_dir, header, expression, arch):
    """(cubin bytes, lowered name) of `expression` from `header` under include_dir."""
    prog = ctypes.c_void_p()
    src = f'#include "{header}"\n'.encode()
    check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"same_machine_code.cu", 0,
                                          None, None), "create")
    try:
        check(nvrtc, nvrtc.nvrtcAddNameExpression(prog, expression.encode()), "name expression")
        options = ["--gpu-architecture=" + arch, "-std=c++17", "-DKTUNE_NVRTC=1",
                   "-I" + include_dir]
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        if nvrtc.nvrtcCompileProgram(prog, len(options), opts) != 0:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileFailure(f"{expression} for {arch} from {include_dir} does not compile:"
                                 "\n" + log.value.decode(errors="replace")[-2000:])
        size = ctypes.c_size_t()
        check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "cubin size")
        cubin = ctypes.create_string_buffer(size.value)
        check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
        lowered = ctypes.c_char_p()
        check(nvrtc, nvrtc.nvrtcGetLoweredName(prog, expression.encode(), ctypes.byref(lowered)),
              "lowered name")
        return cubin.raw, lowered.value.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


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


def code_of(cubin):
    """The .text sections in order of their names: section names carry the mangled kernel name,
    which may change (a new defaulted template parameter) while the code does not."""
    sections = text_sections(cubin)
    return [sections[k] for k in sorted(sections)]


def default_ktune():
    for candidate in ("build/ktune", ".gpu/bin/ktune"):
        if os.access(candidate, os.X_OK):
            return candidate
    return "ktune"


def configurations(ktune, db, op):
    cmd = [ktune, "db", "kernels", "--db", db, "--json"] + (["--op", op] if op else [])
    run = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(run.stderr)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({run.returncode})")
    listed = json.loads(run.stdout)
    return listed["configurations"], listed["skipped"]


def rehash(db, op, old_hashes, current):
    """Sets the template hash of `op`'s rows holding one of `old_hashes` to `current`."""
    con = sqlite3.connect(db)
    with con:
        changed = 0
        for table in ("best", "trials"):
            for old in old_hashes:
                changed += con.execute(f"UPDATE {table} SET template_hash = ? "
                                       "WHERE op = ? AND template_hash = ?",
                                       (current, op, old)).rowcount
    con.close()
    return changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="templates/ folder of the old sources")
    ap.add_argument("--after", required=True, help="templates/ folder of the new sources")
    ap.add_argument("--db", default="db/shipped/h200.db")
    ap.add_argument("--op", help="only this op's rows (default: every op of the database)")
    ap.add_argument("--ktune", default=default_ktune(),
                    help="a ktune built from the new sources (default: build/ktune)")
    ap.add_argument("--arch", action="append", default=[],
                    help="also compile for this target (each row's own is always compiled)")
    ap.add_argument("--rehash", action="store_true",
                    help="give the rows of each op whose code is unchanged the current hash")
    args = ap.parse_args()
    for d in (args.before, args.after):
        if not os.path.isdir(os.path.join(d, "common")):
            sys.exit(f"{d} is not a templates/ folder (it holds no common/)")
    configs, skipped = configurations(args.ktune, args.db, args.op)
    if not configs:
        sys.exit(f"{args.db} has no configurations" + (f" of {args.op}" if args.op else ""))
    nvrtc = load_nvrtc()
    cache = {}
    per_op = collections.defaultdict(lambda: {"same": 0, "total": 0, "old": set(), "current": ""})
    for c in configs:
        state = per_op[c["op"]]
        state["old"].add(c["template_hash"])
        state["current"] = c["current_hash"]
        for arch in dict.fromkeys([c["arch"]] + args.arch):
            for k in c["kernels"]:
                key = (k["file"], k["name"], arch)
                if key not in cache:
                    try:
                        before, _ = compile_cubin(nvrtc, args.before, k["file"], k["name"], arch)
                        after, _ = compile_cubin(nvrtc, args.after, k["file"], k["name"], arch)
                        code_b, code_a = code_of(before), code_of(after)
                        cache[key] = (code_b == code_a, sum(map(len, code_b)),
                                      sum(map(len, code_a)), "")
                    except CompileFailure as e:
                        cache[key] = (False, 0, 0, str(e))
                equal, size_b, size_a, error = cache[key]
                state["total"] += 1
                state["same"] += equal
                what = error.splitlines()[0] if error else f".text {size_b} / {size_a} bytes"
                print(f"{'same' if equal else 'DIFFERENT'} {arch:6} {c['op']} {c['dtype']} "
                      f"{c['problem']} {c['params']}: {what}")
    same = sum(s["same"] for s in per_op.values())
    total = sum(s["total"] for s in per_op.values())
    for op, s in sorted(per_op.items()):
        print(f"{op}: {s['same']} of {s['total']} kernels' .text identical")
    print(f"{same} of {total} .text identical"
          + (f"; {skipped} configurations could not be listed" if skipped else ""))
    if args.rehash:
        for op, s in sorted(per_op.items()):
            stale = s["old"] - {s["current"]}
            if s["same"] != s["total"] or skipped:
                print(f"{op}: not re-hashed (machine code changed or not compared: re-tune)")
            elif not stale:
                print(f"{op}: rows already hold the current hash {s['current'][:8]}")
            else:
                n = rehash(args.db, op, stale, s["current"])
                print(f"{op}: {n} rows re-hashed to {s['current'][:8]}... "
                      f"(from {', '.join(h[:8] for h in sorted(stale))})")
    return 0 if same == total and not skipped else 1


if __name__ == "__main__":
    sys.exit(main())
