#!/usr/bin/env python3
"""Flash attention forward calls (one backend, one shape), repeated, for a profiler: run it under
ncu to read a kernel's pipes, stalls and launch (grid, block, registers, shared memory) next to
a baseline's on the GPU machine, e.g.

  ncu -k regex:"flash_attention|fprop|fmha" --launch-skip 2 --launch-count 1 --set full \\
      --csv --page raw python3 benchmarks/attention_profile.py --backend cudnn \\
      --shape 1,16,16,8192,64,no

Shapes are B,HQ,HKV,N,D,causal as benchmarks/attention_bench.py takes them ([B, H, N, D] bf16,
nq = nk = N). `--backend ktune` calls ktune_flash_attention (attention_bench.py's binding) with
the configuration the database gives (--db; default: the built-in default on an empty
database); torch backends get K and V expanded to HQ heads, as in the bench."""
import argparse
import os
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import attention_bench as ab  # beside this file: the bench's ctypes binding

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="ktune", choices=sorted(BACKENDS) + ["ktune"])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", default="", help="ktune: tuned database (default: empty)")
    ap.add_argument("--shape", default="1,16,16,8192,64,no", help="B,HQ,HKV,N,D,yes|no")
    ap.add_argument("--calls", type=int, default=4)
    args = ap.parse_args()
    (b, h, n, d, causal, hkv), = ab.parse_shapes(args.shape)
    q = torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    if args.backend == "ktune":
        lib = ab.load(args.lib)
        ab.configure(lib, args.db or os.path.join(tempfile.mkdtemp(), "empty.db"))
        params, match = ab.query(lib, ab.shape_key(b, h, n, d, causal, hkv))
        print(f"ktune {args.shape}: {match} {params}", flush=True)
        o = torch.empty_like(q)
        lse = torch.empty(b, h, n, device="cuda", dtype=torch.float32)
        stream = torch.cuda.current_stream().cuda_stream
        for _ in range(args.calls):
            ab.check(lib, lib.ktune_flash_attention(
                q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), b, h,
                hkv, n, n, d, None, int(causal), 0.0, ab.BF16, stream))
    else:
        kx, vx = (t.repeat_interleave(h // hkv, dim=1) if hkv != h else t for t in (k, v))
        with sdpa_kernel(BACKENDS[args.backend]):
            for _ in range(args.calls):
                F.scaled_dot_product_attention(q, kx, vx, is_causal=causal)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
