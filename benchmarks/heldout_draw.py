#!/usr/bin/env python3
"""Draw a held-out set of attention problems over public models' head layouts (issue 9).

A held-out set measures the fallback (`fallback_quality.py`) only while no rule has been read
from it. Once a set's sweeps shaped a default, it is a design set, and the next measurement
needs a new draw. This script makes each draw reproducible: a seed gives the same list on any
machine (Python's `random.Random` is stable across versions for these calls). The list is
pasted into `fallback_problems.py`'s HELD_OUT with the seed and a prediction, before any run.

Usage:
  python3 benchmarks/heldout_draw.py --seed 20261207 --count 28 [--only decode]
Prints one `("op", "shape"),` line per problem: decode (nq 1-8, flash_decode) and prefill
(flash_attention) alternating, with some paged and varlen decode.
"""
import argparse
import math
import random

# (model, query heads, KV heads, head dim), from the models' published configs.
LAYOUTS = [
    ("Llama-3-8B", 32, 8, 128), ("Llama-3-70B", 64, 8, 128), ("Llama-3.2-1B", 32, 8, 64),
    ("Llama-3.2-3B", 24, 8, 128), ("Mistral-7B", 32, 8, 128), ("Mistral-Nemo", 32, 8, 128),
    ("Qwen2-7B", 28, 4, 128), ("Qwen2.5-0.5B", 14, 2, 64), ("Qwen2.5-1.5B", 12, 2, 128),
    ("Qwen2.5-14B", 40, 8, 128), ("Qwen3-32B", 64, 8, 128), ("Gemma-2B", 8, 1, 256),
    ("Gemma-7B", 16, 16, 256), ("Gemma-2-9B", 16, 8, 256), ("Gemma-3-1B", 4, 1, 256),
    ("Gemma-3-4B", 8, 4, 256), ("Gemma-3-27B", 32, 16, 128), ("Phi-3-mini", 32, 32, 96),
    ("Phi-3-medium", 40, 10, 128), ("Phi-4", 40, 10, 128), ("Falcon-7B", 71, 1, 64),
    ("GPT-J-6B", 16, 16, 256), ("StableLM-3B", 32, 32, 80), ("StarCoder2-15B", 48, 4, 128),
    ("Yi-34B", 56, 8, 128), ("InternLM2-20B", 48, 8, 128), ("OLMo-7B", 32, 32, 128),
    ("SmolLM-360M", 15, 5, 64), ("gpt-oss-20b", 64, 8, 64), ("Command-R", 64, 8, 128),
]


def log_uniform(rng, lo, hi):
    """An integer between lo and hi, uniform in log."""
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def decode(rng, hq, hkv, d):
    nq = rng.choice([1, 1, 1, 1, 2, 3, 4, 5, 8])
    nk = log_uniform(rng, 300, 32000)
    b = log_uniform(rng, 1, 64)
    shape = f"b={b},hq={hq},hkv={hkv},nq={nq},nk={nk},d={d},causal={rng.choice(['yes', 'no'])}"
    kind = rng.random()
    if nq == 1 and kind < 0.2:
        shape = shape.replace("causal=yes", "causal=no") + f",page={rng.choice([16, 32, 64])}"
    elif nq == 1 and kind < 0.3:
        shape = shape.replace("causal=yes", "causal=no") + ",varlen=yes"
    return ("flash_decode", shape)


def prefill(rng, hq, hkv, d):
    nq = log_uniform(rng, 100, 8000)
    nk = nq if rng.random() < 0.7 else nq + log_uniform(rng, 100, 8000)  # chunked prefill
    b = max(1, min(16, int(16000 // nq) or 1, log_uniform(rng, 1, 16)))
    causal = rng.choice(["yes", "no"])
    return ("flash_attention", f"b={b},hq={hq},hkv={hkv},nq={nq},nk={nk},d={d},causal={causal}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=28)
    ap.add_argument("--only", choices=["decode", "prefill"],
                    help="draw this op's problems only (default: both, alternating)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    for i in range(args.count):
        model, hq, hkv, d = rng.choice(LAYOUTS)
        kind = {"decode": decode, "prefill": prefill}.get(args.only)
        op, shape = (kind or (decode if i % 2 == 0 else prefill))(rng, hq, hkv, d)
        print(f'    ("{op}", "{shape}"),  # {model}')


if __name__ == "__main__":
    main()
