#!/usr/bin/env python3
"""Where decode's time goes that bytes do not explain (issue 9): time ktune (the runtime's
built-in default, empty database) and torch SDPA's cuDNN backend on two families of decode
shapes that grow only in K/V bytes, and fit time = fixed + bytes / rate for each (least squares
over the family). `rate` is the streaming rate an op approaches on large inputs; `fixed` what it
pays per call whatever its size (launch, first loads, the tail, a combine). The copy bandwidth of
the same process is printed beside them.

Families (bf16, d=128, one query row, hq=64/32 over hkv=8):
  b=1,  hq=64, nk = 8192 .. 131072   (the issue's bar 2 is nk=32768)
  b = 2 .. 32, hq=32, nk=4096        (the issue's bar 1 is b=16)

Usage (GPU machine, after scripts/gpu_bundle.sh, carrying .gpu):
  python3 benchmarks/decode_scaling.py --lib .gpu/lib/libktune.so --out $OUT
"""
import argparse
import datetime
import os
import tempfile

import torch

import decode_bench as bench  # beside this file: the same loops and binding
import report

FAMILIES = {
    "b=1,hq=64,hkv=8 over nk": [(1, 64, 8, 1, nk, 128, False)
                                for nk in (8192, 16384, 32768, 65536, 131072)],
    "hq=32,hkv=8,nk=4096 over b": [(b, 32, 8, 1, 4096, 128, False) for b in (2, 4, 8, 16, 32)],
}


def fit(xs, ys):
    """Least squares y = a + x / r: returns (a, r) with x in MB, y in us, r in TB/s."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, 1.0 / slope


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    kt = bench.Ktune(args.lib)
    empty = os.path.join(tempfile.mkdtemp(), "empty.db")
    copy = bench.copy_tbps()
    rows, fits = [], {}
    for family, shapes in FAMILIES.items():
        xs, ys = [], {"ktune": [], "cudnn": []}
        for s in shapes:
            mb = bench.kv_bytes(s) / 1e6
            k = bench.ktune_time(kt, s, torch.bfloat16, empty, empty)["default"]["us"]
            cudnn = bench.sdpa_time(s, "sdpa_cudnn", torch.bfloat16)
            if "us" not in cudnn:
                raise SystemExit(f"cuDNN refused {bench.shape_str(s)}: {cudnn.get('error')}")
            c = cudnn["us"]
            xs.append(mb)
            ys["ktune"].append(k)
            ys["cudnn"].append(c)
            rows.append((family, bench.shape_str(s), mb, k, c))
            print(f"{bench.shape_str(s)}: {mb:.0f} MB ktune {k:.1f} us cudnn {c:.1f} us", flush=True)
        fits[family] = {name: fit(xs, y) for name, y in ys.items()}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Decode time against K/V bytes ({torch.cuda.get_device_name(0)}, {stamp})", "",
             f"command: `python3 benchmarks/decode_scaling.py --lib {args.lib}`; copy bandwidth "
             f"in the same process {copy:.2f} TB/s. ktune: the built-in default through "
             "ktune_attention; cuDNN: torch SDPA; both timed by decode_bench.py's loop.", "",
             "| family | shape | K+V MB | ktune us (% of copy) | cuDNN us (% of copy) |",
             "|---|---|---|---|---|"]
    for family, shape, mb, k, c in rows:
        lines.append(f"| {family} | {shape} | {mb:.0f} | {k:.1f} ({mb / k / copy * 100:.0f} %) | "
                     f"{c:.1f} ({mb / c / copy * 100:.0f} %) |")
    lines += ["", "Fit time = fixed + bytes / rate over each family:", "",
              "| family | ktune fixed us | ktune rate TB/s | cuDNN fixed us | cuDNN rate TB/s |",
              "|---|---|---|---|---|"]
    for family, f in fits.items():
        lines.append(f"| {family} | {f['ktune'][0]:.1f} | {f['ktune'][1]:.2f} | "
                     f"{f['cudnn'][0]:.1f} | {f['cudnn'][1]:.2f} |")
    report.write(args.out, "decode_scaling", lines,
                 {"copy_tbps": copy, "rows": rows, "fits": fits})


if __name__ == "__main__":
    main()
