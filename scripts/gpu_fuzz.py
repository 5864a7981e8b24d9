#!/usr/bin/env python3
"""Random problems through the whole tuning path, to find what no table of ours holds.

Draws problems of flash_attention, flash_decode and moe (with --ops, the fused ops too) from a
seed (head dims that are any multiple of 8 up to 256, lengths that are multiples of no tile,
GQA/MQA/MHA, causal, sliding windows, soft-capping, ALiBi, paged and variable-length batches,
token counts and routings of odd-sized MoE layers, odd row widths), keeps those `ktune space`
accepts, writes them as plans, and sweeps them with `ktune sweep --plan --budget N`, one plan per
op: each problem's default and N - 1 random valid configurations (moe: the staged strategy's
first, its space being sampled) are compiled, run on poisoned outputs and verified against the
op's reference (the tuner's checks); every trial lands in a fresh database. Reports every trial
that failed (compile, launch, time limit, wrong result: status, configuration, detail), then per
op the trials by status.

  python3 scripts/gpu_fuzz.py --ktune .gpu/bin/ktune --out $OUT/fuzz --seed 1 --count 20

--dry-run writes and checks the plan without a GPU. Exit status 1 if any trial failed.
"""
import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import time


def attention_problem(rng, decode):
    hkv = rng.choice([1, 1, 2, 4, 8])
    hq = hkv * rng.choice([1, 2, 4, 8])
    b = rng.randint(1, 4)
    # Half the head dims between the tiles (and below 32), half the tiles' own.
    d = rng.choice([8 * rng.randint(1, 32), rng.choice([32, 64, 96, 128, 256])])
    nk = rng.choice([rng.randint(1, 300), rng.randint(300, 5000)])
    nq = (rng.randint(1, 70) if decode
          else rng.choice([rng.randint(1, 200), rng.randint(1, nk + 100)]))
    f = {"b": b, "hq": hq, "hkv": hkv, "nq": nq, "nk": nk, "d": d}
    f["causal"] = rng.choice(["no", "yes"])
    if rng.random() < 0.3:
        f["window"] = rng.randint(1, max(1, nk))
    if rng.random() < 0.25:
        f["softcap"] = "yes"
    if rng.random() < 0.25:
        f["alibi"] = "yes"
    r = rng.random()
    if r < 0.25:
        f["varlen"] = "yes"
    elif r < 0.55:
        f["page"] = rng.choice([16, 32, 64, 128, 256])
    dtype = rng.choice(["bf16", "fp16"])
    if not decode and d in (128, 256) and rng.random() < 0.3:
        dtype = "e4m3"  # the wgmma kernel's FP8 path (ktune space refuses what it cannot take)
    return dtype, ",".join(f"{k}={v}" for k, v in f.items())


def moe_problem(rng):
    routing = rng.choice(["softmax", "softmax_renorm", "sigmoid_group", "precomputed",
                          "expert_choice"])
    e = rng.choice([4, 8, 16, 32, 60, 64])
    k = rng.randint(1, min(8, e))
    h = 8 * rng.randint(8, 384)   # 64..3072, multiples of 8 only
    i = 8 * rng.randint(8, 384)
    t = rng.choice([rng.randint(1, 40), rng.randint(40, 700)])
    f = {"e": e, "k": k, "h": h, "i": i, "t": t, "routing": routing}
    if routing == "sigmoid_group":
        groups = [g for g in (1, 2, 4, 8) if e % g == 0]
        g = rng.choice(groups)
        f["n_group"] = g
        f["topk_group"] = rng.randint(1, g)
        f["k"] = min(k, f["topk_group"] * (e // g))
    return rng.choice(["bf16", "fp16"]), ",".join(f"{k}={v}" for k, v in f.items())


def fused_problem(rng, op):
    # Rows from 1, widths from 1 (odd ones included) to 65536: every vector width's tail.
    m = rng.choice([rng.randint(1, 64), rng.randint(1, 20000)])
    n = rng.choice([rng.randint(1, 300), rng.randint(300, 65536), 8 * rng.randint(1, 2048)])
    f = {"m": m, "n": n}
    if op == "layernorm":
        f["residual"] = rng.choice(["no", "yes"])
    if op == "bias_act":
        f["act"] = rng.choice(["gelu_tanh", "gelu_erf", "silu", "relu"])
    return rng.choice(["bf16", "fp16"]), ",".join(f"{k}={v}" for k, v in f.items())


def draw(rng, op):
    if op == "moe":
        return moe_problem(rng)
    if op in ("flash_attention", "flash_decode"):
        return attention_problem(rng, op == "flash_decode")
    return fused_problem(rng, op)


def refusal(ktune, op, dtype, shape):
    """None if `ktune space` takes the problem (with a valid point on sm_90a), else why not."""
    r = subprocess.run([ktune, "space", "--op", op, "--shape", shape, "--dtype", dtype,
                        "--arch", "sm_90a", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        return r.stderr.strip().split(": ")[-1][:100]
    j = json.loads(r.stdout)
    # A sampled space (moe's) may miss its few valid points: the sweep's default decides there.
    return None if "valid" not in j or j["valid"] > 0 else "no valid point"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ktune", default="build/ktune")
    ap.add_argument("--out", default="/tmp/ktune-fuzz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=15, help="problems per op")
    ap.add_argument("--ops", default="flash_attention,flash_decode,moe",
                    help="any of these and add_rmsnorm, layernorm, bias_act, swiglu, softmax")
    ap.add_argument("--budget", type=int, default=3, help="configurations per problem")
    ap.add_argument("--time-limit", type=int, default=0,
                    help="seconds for each op's sweep (0: none)")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    lines, refused = {}, []
    for op in a.ops.split(","):
        kept = tries = 0
        lines[op] = []
        while kept < a.count and tries < 20 * a.count:
            tries += 1
            dtype, shape = draw(rng, op)
            why = refusal(a.ktune, op, dtype, shape)
            if why is None:
                lines[op].append(f"{op} {dtype} {shape}")
                kept += 1
            else:
                refused.append(f"{why}: {op} {dtype} {shape}" if why == "no valid point" else why)
    for op, ls in lines.items():
        with open(os.path.join(a.out, f"fuzz-{op}.txt"), "w") as f:
            f.write(f"# scripts/gpu_fuzz.py --seed {a.seed} --count {a.count} ({op})\n")
            f.write("\n".join(ls) + "\n")
    total = sum(len(v) for v in lines.values())
    print(f"{total} problems ({len(refused)} drawn and refused by ktune space) in {a.out}")
    if a.dry_run:
        for why in sorted(set(refused)):
            print(f"  refused {refused.count(why)}x: {why}")
        return 0
    db = os.path.join(a.out, "fuzz.db")
    if os.path.exists(db):
        os.remove(db)
    start = time.time()
    rc = 0
    for op, ls in lines.items():
        # One plan per op: moe's space is sampled, so it keeps its staged strategy (the default
        # and its neighbours); the attention ops draw random valid points.
        plan = os.path.join(a.out, f"fuzz-{op}.txt")
        cmd = [a.ktune, "sweep", "--plan", plan, "--budget", str(a.budget), "--seed",
               str(a.seed), "--db", db, "--no-warm-start", "--strategy",
               "staged" if op == "moe" else "random"]
        if a.time_limit:
            cmd += ["--time-limit", str(a.time_limit)]
        with open(os.path.join(a.out, f"sweep-{op}.log"), "w") as log:
            rc |= subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    wall = time.time() - start
    con = sqlite3.connect(db)
    rows = con.execute("select op, status, count(*), count(distinct problem_key || dtype) "
                       "from trials group by op, status order by op, status").fetchall()
    # `invalid` rows (a sweep that walks the whole space records the space's refusals) are not
    # failures.
    bad = con.execute("select op, dtype, problem_key, params_key, status, detail from trials "
                      "where status not in ('ok', 'invalid') order by op, problem_key").fetchall()
    swept = con.execute("select count(distinct op || problem_key || dtype) from trials where "
                        "status != 'invalid'").fetchone()[0]
    for r in bad:
        print("FAILED:", " ".join(str(x) for x in r[:5]), "::", r[5][:300])
    print(f"sweeps rc={rc}, {wall:.0f} s, {swept} of {total} problems measured")
    print("| op | status | trials | problems |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    return 1 if bad or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
