#!/usr/bin/env python3
"""Sustained rate, SM clock and board power of the MoE layer against dense cuBLAS GEMMs.

Why (benchmarks/moe/NOTES.md, stop 71): the Mixtral layer at T >= 1024 holds the H100 at its
power limit (686-696 W at 1275-1575 MHz, 1980 MHz idle), so what the issue-11 bar (470 TFLOP/s at
T=1024) asks of it is work per joule at the limit, not latency hidden. This runs each workload
below back to back for --seconds (after --warmup seconds of the same), captured in a CUDA graph
of --batch calls, while `nvidia-smi` samples clocks and power every 100 ms, and prints per
workload: TFLOP/s (median of the graph replays), the mean SM clock and power over the timed
window, and TFLOP per joule (rate / power). A workload that holds the limit and runs at a lower
clock than cuBLAS spends more energy per flop; one under the limit is bound elsewhere.

Workloads: cuBLAS bf16 8192^3; the dense GEMMs of the layer's two products at T*k rows
(gemm1 [T*k, H] x [H, 2I], gemm2 [T*k, I] x [I, H]: the same flops as the grouped GEMMs, one
group); the ktune layer (routing to combine) at --tokens from --db; sort + torch._grouped_mm.

On the GPU machine, with the bundle (scripts/gpu_bundle.sh .gpu) carried:
  python3 benchmarks/moe/power_probe.py --db db/shipped/h100.db --tokens 1024,4096 --out $OUT
"""
import argparse
import datetime
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "moe_bench", os.path.join(HERE, "..", "moe_bench.py"))
mb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mb)


class Smi:
    """nvidia-smi sampling clocks and power every 100 ms, each sample stamped with nvidia-smi's
    own time (so a buffered pipe cannot shift it), read by a thread into (epoch s, MHz, W)."""

    def __init__(self, path):
        self.f = open(path, "w")
        self.p = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw",
             "--format=csv,noheader,nounits", "-lms", "100",
             "-i", str(torch.cuda.current_device())],
            stdout=subprocess.PIPE, text=True)
        self.samples = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.p.stdout:
            self.f.write(line)
            try:
                stamp, mhz, watts = (v.strip() for v in line.split(","))
                t = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
                self.samples.append((t, float(mhz), float(watts)))
            except ValueError:
                continue

    def window(self, t0, t1):
        """Mean MHz and W of the samples stamped in [t0, t1] (waiting up to 10 s for one
        stamped after t1 to arrive), and their count."""
        deadline = time.time() + 10
        while (not self.samples or self.samples[-1][0] < t1) and time.time() < deadline:
            time.sleep(0.05)
        s = [(m, w) for (t, m, w) in list(self.samples) if t0 <= t <= t1]
        if not s:
            return float("nan"), float("nan"), 0
        return statistics.mean(m for m, _ in s), statistics.mean(w for _, w in s), len(s)

    def close(self):
        self.p.terminate()
        self.thread.join(timeout=5)
        self.f.close()


def sustained(name, fn, flops, args, smi):
    """fn captured in a graph of args.batch calls, replayed for args.warmup then args.seconds;
    each replay timed by events. Returns the row for the table."""
    cap = mb.Capture(lambda: [fn() for _ in range(args.batch)][-1])
    end_warm = time.time() + args.warmup
    while time.time() < end_warm:
        cap.replay()
    torch.cuda.synchronize()
    times = []
    t0 = time.time()
    t_end = t0 + args.seconds
    while time.time() < t_end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        cap.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / args.batch)
    t1 = time.time()
    mhz, watts, n = smi.window(t0, t1)
    ms = statistics.median(times)
    tflops = flops / (ms * 1e-3) / 1e12
    row = {"name": name, "ms": ms, "tflops": tflops, "mhz": mhz, "watts": watts,
           "tflop_per_j": tflops / watts if watts == watts else float("nan"),
           "replays": len(times), "smi_samples": n}
    print(f"{name:34s} {ms:8.3f} ms {tflops:6.0f} TFLOP/s {mhz:6.0f} MHz {watts:5.0f} W "
          f"{row['tflop_per_j']:.3f} TFLOP/J ({n} samples)", flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=".gpu/lib/libktune.so")
    ap.add_argument("--db", required=True, help="tuned database for the ktune rows")
    ap.add_argument("--layer", default="mixtral", choices=sorted(mb.LAYERS))
    ap.add_argument("--tokens", default="1024,4096")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    args = ap.parse_args()
    if not args.out:
        ap.error("--out (or $OUT) is required")
    if not os.path.isfile(args.db):
        ap.error(f"--db {args.db}: no such file")
    os.makedirs(args.out, exist_ok=True)
    smi = Smi(os.path.join(args.out, "power_probe_smi.csv"))
    rows = []
    dev = mb.DEVICE
    bf = torch.bfloat16
    n = 8192
    a, b = torch.randn(n, n, device=dev, dtype=bf), torch.randn(n, n, device=dev, dtype=bf)
    c = torch.empty(n, n, device=dev, dtype=bf)
    rows.append(sustained("cublas 8192^3", lambda: torch.matmul(a, b, out=c), 2.0 * n ** 3,
                          args, smi))
    del a, b, c

    layer = mb.Layer(args.layer, 0)
    cfg = layer.cfg
    h, i, k = cfg["h"], cfg["i"], cfg["k"]
    header = os.path.join(os.path.dirname(os.path.abspath(args.lib)), "..", "include", "ktune",
                          "ktune.h")
    kt = mb.KtuneMoe(args.lib, header)
    grouped_align, _ = mb.probe_grouped_mm()
    for t in (int(s) for s in args.tokens.split(",") if s):
        m = t * k
        flops = 6.0 * h * i * t * k
        x1 = torch.randn(m, h, device=dev, dtype=bf)
        w1 = torch.randn(2 * i, h, device=dev, dtype=bf)
        o1 = torch.empty(m, 2 * i, device=dev, dtype=bf)
        rows.append(sustained(f"cublas gemm1 {m}x{2 * i}x{h}",
                              lambda: torch.matmul(x1, w1.t(), out=o1), 2.0 * m * 2 * i * h,
                              args, smi))
        x2 = torch.randn(m, i, device=dev, dtype=bf)
        w2 = torch.randn(h, i, device=dev, dtype=bf)
        o2 = torch.empty(m, h, device=dev, dtype=bf)
        rows.append(sustained(f"cublas gemm2 {m}x{h}x{i}",
                              lambda: torch.matmul(x2, w2.t(), out=o2), 2.0 * m * h * i,
                              args, smi))
        del x1, w1, o1, x2, w2, o2
        x, logits, _, _, _ = mb.make_inputs(layer, t, 1)
        y = torch.empty(t, h, device=dev, dtype=bf)
        for tag, db in (("tuned", os.path.abspath(args.db)),
                        ("default", os.path.join(tempfile.mkdtemp(), "empty.db"))):
            kt.configure(db)
            call = kt.args(cfg, t, x, logits, layer.bias, layer.w1, layer.w2, y)
            nbytes = kt.workspace_bytes(call)
            ws = torch.empty(nbytes, device=dev, dtype=torch.uint8) if nbytes else None
            call = kt.args(cfg, t, x, logits, layer.bias, layer.w1, layer.w2, y, workspace=ws)
            params, match = kt.query(mb.shape_key(cfg, t))
            print(f"ktune {tag} T={t}: {match} {params}", flush=True)
            def run(call=call):
                kt(call, torch.cuda.current_stream().cuda_stream)
                return y
            rows.append(sustained(f"ktune {tag} T={t}", run, flops, args, smi))
            rows[-1]["params"], rows[-1]["match"] = params, match
        if grouped_align is not None:
            rows.append(sustained(f"sort + grouped_mm T={t}",
                                  lambda: mb.moe_grouped(layer, x, logits, grouped_align),
                                  flops, args, smi))
    smi.close()
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": " ".join(sys.argv), "seconds": args.seconds, "warmup": args.warmup,
            "batch": args.batch}
    with open(os.path.join(args.out, "power_probe.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print(f"==== {meta['device']}, {meta['date']}")
    print(f"{'workload':34s} {'ms':>8s} {'TFLOP/s':>8s} {'MHz':>6s} {'W':>5s} {'TFLOP/J':>8s}")
    for r in rows:
        print(f"{r['name']:34s} {r['ms']:8.3f} {r['tflops']:8.0f} {r['mhz']:6.0f} "
              f"{r['watts']:5.0f} {r['tflop_per_j']:8.3f}")


if __name__ == "__main__":
    main()
