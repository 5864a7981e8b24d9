"""Times torch scaled_dot_product_attention (flash and cuDNN backends) on the ANCHORS attention
shapes, bf16, [B, H, N, D], and prints them beside ktune's best config from fa_dev's CSV.

Usage: python3 sdpa_bench.py [fa_dev.csv] [out.csv]
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [
    (16, 16, 512, 64, False), (8, 16, 1024, 64, False), (4, 16, 2048, 64, False),
    (2, 16, 4096, 64, False), (1, 16, 8192, 64, False), (2, 16, 4096, 64, True),
    (1, 16, 8192, 64, True), (16, 16, 512, 128, False), (8, 16, 1024, 128, False),
    (2, 16, 4096, 128, False), (1, 16, 8192, 128, False), (1, 16, 16384, 128, False),
    (2, 16, 4096, 128, True), (1, 16, 8192, 128, True), (1, 16, 16384, 128, True),
]
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def median_ms(fn, reps=30):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1))
    times.sort()
    return times[len(times) // 2]


def main():
    ours = {}
    if len(sys.argv) > 1:
        for line in open(sys.argv[1]):
            b, h, n, d, c, cfg, ms, tf = line.strip().split(",")
            key = (int(b), int(h), int(n), int(d), c == "1")
            if key not in ours or float(tf) > ours[key][1]:
                ours[key] = (cfg, float(tf))
    out = open(sys.argv[2], "w") if len(sys.argv) > 2 else None
    print(f"{'B':>2} {'H':>2} {'N':>5} {'D':>3} {'causal':>6} | {'ktune':>6} {'best config':<24} |"
          f" {'flash':>6} {'cudnn':>6} | {'/flash':>6} {'/cudnn':>6}")
    for b, h, n, d, causal in SHAPES:
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
        res = {}
        for name, backend in BACKENDS.items():
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal))
                res[name] = flops / (ms * 1e-3) / 1e12
            except Exception as e:  # a backend may refuse a shape
                print(f"  {name} failed: {e}", file=sys.stderr)
                res[name] = float("nan")
        cfg, tf = ours.get((b, h, n, d, causal), ("-", float("nan")))
        print(f"{b:>2} {h:>2} {n:>5} {d:>3} {str(causal):>6} | {tf:6.1f} {cfg:<24} |"
              f" {res['flash']:6.1f} {res['cudnn']:6.1f} | {tf / res['flash']:6.2f}"
              f" {tf / res['cudnn']:6.2f}")
        if out:
            out.write(f"{b},{h},{n},{d},{int(causal)},{res['flash']:.2f},{res['cudnn']:.2f}\n")
        del q, k, v


if __name__ == "__main__":
    main()
