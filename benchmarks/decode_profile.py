#!/usr/bin/env python3
"""torch SDPA decode calls (one backend, one shape), repeated, for a profiler: run it under ncu
to read a baseline's kernels on the GPU machine (grid, block, registers, shared memory, DRAM
throughput), e.g. for the decode bars:

  ncu --launch-skip 3 --launch-count 2 --section SpeedOfLight --section LaunchStats \\
      --section Occupancy --csv --page details \\
      python3 benchmarks/decode_profile.py --backend cudnn --shape 16,32,8,1,4096,128

Shapes are b,hq,hkv,nq,nk,d (K and V [b, hkv, nk, d] as benchmarks/decode_bench.py passes them,
bf16, bottom-right causal when nq > 1). `--backend ktune` makes the same calls through
ktune_attention (benchmarks/decode_bench.py's binding; --lib, --db, default: the built-in
default on an empty database). scripts/ncu_table.py prints one line per kernel."""
import argparse
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="cudnn", choices=sorted(BACKENDS) + ["ktune"])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="ktune: tuned database (default: empty)")
    ap.add_argument("--shape", default="16,32,8,1,4096,128", help="b,hq,hkv,nq,nk,d")
    ap.add_argument("--calls", type=int, default=6)
    args = ap.parse_args()
    b, hq, hkv, nq, nk, d = (int(v) for v in args.shape.split(","))
    q = torch.randn(b, hq, nq, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, hkv, nk, d, dtype=torch.bfloat16, device="cuda")
    mask = None
    if nq > 1:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(nq, nk)
    if args.backend == "ktune":
        import decode_bench  # beside this file: the bench's ctypes binding
        kt = decode_bench.Ktune(args.lib)
        kt.configure(args.db or os.path.join(tempfile.mkdtemp(), "empty.db"), False)
        o = torch.empty_like(q)
        call = kt.args(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), b=b,
                       hq=hq, hkv=hkv, nq=nq, nk=nk, d=d, causal=int(nq > 1), dtype=2)
        for _ in range(args.calls):
            kt.attention(call)
        torch.cuda.synchronize()
        return
    with sdpa_kernel(BACKENDS[args.backend]):
        for _ in range(args.calls):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
