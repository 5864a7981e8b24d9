#!/usr/bin/env python3
"""Fits the decode defaults' cost model for one GPU from its recorded exhaustive sweeps.

The model ranks flash_decode configurations for a problem: gradient-boosted trees (scikit-learn's
HistGradientBoostingRegressor) predict log(median / the sweep's fastest median) from features of
the problem and the configuration (FEATURES; templates/decode/cost_model.cpp computes the same).
The runtime's default then takes the configuration of least predicted time among the valid ones,
unless the rules' default is predicted within HYBRID_MARGIN of it (then the rules' default stays).

It reads every trials file under benchmarks/results whose name says the GPU (the
`*-trials.csv.gz` that benchmarks/fallback_quality.py writes: each ok trial's parameters and
median of an exhaustive sweep), keeps bf16 problems of the model's domain (contiguous,
fixed-length K/V without a mask variant; at least 30 points), and:
  1. cross-validates by problem (10 folds: each problem's pick made by a model that never saw
     it) against the rules' defaults (`ktune best` with KTUNE_DECODE_COST_MODEL=0) and prints
     both: fastest / chosen per problem, geometric mean, worst;
  2. fits on all of them and writes templates/decode/cost_model_<gpu>.inc (the trees as a data
     table, the domain's bounds) and tests/data/decode_cost_model_<gpu>.txt (features and
     predictions that the C++ must reproduce; tests/decode_cost_model_test.cpp).

Usage: python3 benchmarks/decode/fit_cost_model.py --gpu h100 [--ktune build/ktune] [--no-write]
Needs scikit-learn (pip install scikit-learn); the build does not.
"""
import argparse
import math
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import default_eval  # noqa: E402  (load_trials, files_for, DEVICES)

SM_COUNT = {"h100": 132}  # the model serves this SM count only (cost_model.cpp)
SMEM_PER_SM = 233472      # 228 KiB: the feature's CTAs per SM, as Hopper holds them
TILE_HEAD_DIMS = (32, 64, 96, 128, 256)
HYBRID_MARGIN = 0.02      # log units: the rules' default stays within this of the model's pick
PARAMS = ("splits", "block_m", "block_n", "warps", "stages", "merge", "kv_split", "tma")
FEATURES = ("log2_b", "log2_hq", "log2_hkv", "nq", "log2_nk", "tile_d", "data_d", "causal",
            "log2_rows", "log2_pairs", "splits", "block_m", "block_n", "warps", "stages",
            "merge", "kv_split", "tma", "log2_ctas", "ctas_per_sm", "log2_split_keys",
            "tiles_per_split", "smem_kib", "ctas_fit", "waves", "grid_fill", "row_padding",
            "row_tiles", "log2_bytes_read")
HGB = dict(max_iter=200, learning_rate=0.1, max_leaf_nodes=31, min_samples_leaf=20,
           l2_regularization=1.0, early_stopping=False, random_state=0)


def dims_of(problem):
    d = dict(item.split("=") for item in problem.split(","))
    return {"b": int(d["b"]), "hq": int(d["hq"]), "hkv": int(d["hkv"]), "nq": int(d["nq"]),
            "nk": int(d["nk"]), "d": int(d["d"]), "causal": d["causal"] == "yes",
            "page": int(d.get("page", 0)), "varlen": d.get("varlen") == "yes",
            "variant": any(k in d for k in ("window", "softcap", "alibi"))}


def in_domain(s):
    """Contiguous, fixed-length K/V without a mask variant: what the model was read from."""
    return s["page"] == 0 and not s["varlen"] and not s["variant"]


def tile_d(d):
    return next((t for t in TILE_HEAD_DIMS if d <= t), d)


def config_of(params):
    kv = dict(item.split("=") for item in params.split(","))
    return {p: int(kv.get(p, 0)) for p in PARAMS}


def features(s, c, sm_count):
    """FEATURES of problem `s` (dims_of) under configuration `c` (config_of); cost_model.cpp's
    cost_model_features computes the same, in the same order."""
    d = tile_d(s["d"])
    rows = s["hq"] // s["hkv"] * s["nq"]
    pairs = s["b"] * s["hkv"]
    bm, bn, sp = c["block_m"], c["block_n"], c["splits"]
    row_tiles = (rows + bm - 1) // bm
    ctas = pairs * row_tiles * sp
    smem = c["stages"] * bn * d * 4 + bm * d * 2
    fit = max(1, min(32, SMEM_PER_SM // (smem + 1024)))
    waves = (ctas + fit * sm_count - 1) // (fit * sm_count)
    tiles = (s["nk"] + bn - 1) // bn
    return [math.log2(s["b"]), math.log2(s["hq"]), math.log2(s["hkv"]), float(s["nq"]),
            math.log2(s["nk"]), float(d), float(s["d"]), float(s["causal"]),
            math.log2(rows), math.log2(pairs), float(sp), float(bm), float(bn),
            float(c["warps"]), float(c["stages"]), float(c["merge"]), float(c["kv_split"]),
            float(c["tma"]), math.log2(ctas), ctas / sm_count, math.log2(s["nk"] / sp),
            tiles / sp, smem / 1024, float(fit), float(waves), ctas / (fit * sm_count),
            row_tiles * bm / rows, float(row_tiles),
            math.log2(pairs * s["nk"] * s["d"] * 4 * row_tiles)]


def rule_defaults(ktune, gpu, keys):
    """(dtype, problem) -> params of the rules' defaults (the model switched off)."""
    work = tempfile.mkdtemp(prefix="ktune-fit-")
    try:
        answers = default_eval.defaults(f"KTUNE_DECODE_COST_MODEL=0 {ktune}", gpu, keys, work)
        return {k: params for k, (_, params) in answers.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dataset(trials, sm_count):
    """Rows of (problem index, params, features, log(median / fastest))."""
    X, Y, G, K = [], [], [], []
    for gi, key in enumerate(trials):
        medians = trials[key]
        best = min(medians.values())
        s = dims_of(key[1])
        for params, us in sorted(medians.items()):
            X.append(features(s, config_of(params), sm_count))
            Y.append(math.log(us / best))
            G.append(gi)
            K.append(params)
    return X, Y, G, K


def pick(pred, idx, K, rule_params, margin):
    """The index of the model's choice among idx: least predicted, unless the rules' default
    is predicted within `margin` of it."""
    j = min(idx, key=lambda i: pred[i])
    rule = [i for i in idx if K[i] == rule_params]
    if rule and pred[rule[0]] - pred[j] <= margin:
        return rule[0]
    return j


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def cross_validate(keys, X, Y, G, K, rules):
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.model_selection import GroupKFold
    X, Y, G = np.array(X), np.array(Y), np.array(G)
    pred = np.zeros(len(Y))
    for train, test in GroupKFold(n_splits=10).split(X, Y, G):
        m = HistGradientBoostingRegressor(**HGB).fit(X[train], Y[train])
        pred[test] = m.predict(X[test])
    out = {"rules": [], "model": [], "hybrid": []}
    for gi, key in enumerate(keys):
        idx = list(np.where(G == gi)[0])
        by = {K[i]: i for i in idx}
        rule = rules[key]
        if rule not in by:
            print(f"  {key[1]}: the rules' default {rule} not recorded; left out")
            continue
        out["rules"].append(math.exp(-Y[by[rule]]))
        out["model"].append(math.exp(-Y[pick(pred, idx, K, None, 0)]))
        out["hybrid"].append(math.exp(-Y[pick(pred, idx, K, rule, HYBRID_MARGIN)]))
        print(f"  {key[1]}: rules {out['rules'][-1]:.3f}, model {out['model'][-1]:.3f}, "
              f"hybrid {out['hybrid'][-1]:.3f}")
    for name, xs in out.items():
        print(f"{name}: {len(xs)} problems, geometric mean {geo(xs):.3f}, worst {min(xs):.3f}, "
              f"under 0.85: {sum(x < 0.85 for x in xs)}")


def tree_nodes(model):
    """Flat (feature, threshold or leaf value, left, right) rows and each tree's root index."""
    nodes, roots = [], []
    for (predictor,) in model._predictors:
        base = len(nodes)
        roots.append(base)
        for n in predictor.nodes:
            if n["is_leaf"]:
                nodes.append((-1, float(n["value"]), 0, 0))
            else:
                nodes.append((int(n["feature_idx"]), float(n["num_threshold"]),
                              base + int(n["left"]), base + int(n["right"])))
    return nodes, roots


def predict(nodes, roots, baseline, x):
    total = baseline
    for r in roots:
        i = r
        while nodes[i][0] >= 0:
            f, t, left, right = nodes[i]
            i = left if x[f] <= t else right
        total += nodes[i][1]
    return total


def write_model(gpu, model, trials, X, K, G, sklearn_version):
    import numpy as np
    nodes, roots = tree_nodes(model)
    baseline = float(np.ravel(model._baseline_prediction)[0])
    Xa = np.array(X)
    mine = np.array([predict(nodes, roots, baseline, x) for x in X[:2000]])
    theirs = model.predict(Xa[:2000])
    if np.max(np.abs(mine - theirs)) > 1e-9:
        sys.exit(f"the exported trees disagree with scikit-learn by {np.max(np.abs(mine - theirs))}")
    shapes = [dims_of(k[1]) for k in trials]
    rows = [s["hq"] // s["hkv"] * s["nq"] for s in shapes]
    pairs = [s["b"] * s["hkv"] for s in shapes]
    nks = [s["nk"] for s in shapes]
    name = gpu.upper()
    path = os.path.join(ROOT, "templates", "decode", f"cost_model_{gpu}.inc")
    with open(path, "w") as f:
        f.write(f"// Generated by benchmarks/decode/fit_cost_model.py --gpu {gpu} (scikit-learn "
                f"{sklearn_version}) from {len(trials)} exhaustive sweeps ({len(X)} timed points) under\n"
                f"// benchmarks/results/*{gpu}*-trials.csv.gz. Do not edit: re-run the script.\n")
        f.write(f"// {len(roots)} trees, {len(nodes)} nodes: {{feature (-1: leaf), threshold "
                "(leaf: value), left, right}.\n")
        f.write(f"constexpr double k{name}Baseline = {baseline!r};\n")
        f.write(f"constexpr CostModelDomain k{name}Domain = {{{min(nks)}, {max(nks)}, {min(pairs)}, "
                f"{max(pairs)}, {min(rows)}, {max(rows)}, {max(p * n for p, n in zip(pairs, nks))}}};\n")
        f.write(f"constexpr int k{name}Roots[] = {{\n")
        for i in range(0, len(roots), 16):
            f.write("    " + ", ".join(str(r) for r in roots[i:i + 16]) + ",\n")
        f.write("};\n")
        f.write(f"constexpr CostNode k{name}Nodes[] = {{\n")
        for i in range(0, len(nodes), 3):
            f.write("    " + " ".join(f"{{{n[0]}, {n[1]!r}, {n[2]}, {n[3]}}}," for n in nodes[i:i + 3])
                    + "\n")
        f.write("};\n")
    print(f"wrote {os.path.relpath(path, ROOT)}: {len(roots)} trees, {len(nodes)} nodes")
    # Fixture: 60 points of 20 problems, their features and predictions.
    rng = random.Random(0)
    keys = list(trials)
    fixture = os.path.join(ROOT, "tests", "data", f"decode_cost_model_{gpu}.txt")
    with open(fixture, "w") as f:
        f.write(f"# Generated by benchmarks/decode/fit_cost_model.py --gpu {gpu}: problem, params, "
                "then the features and the prediction that templates/decode/cost_model.cpp "
                "must reproduce.\n")
        for gi in sorted(rng.sample(range(len(keys)), 20)):
            idx = [i for i in range(len(G)) if G[i] == gi]
            for i in sorted(rng.sample(idx, min(3, len(idx)))):
                x = X[i]
                f.write(f"{keys[gi][1]} {K[i]} {' '.join(repr(v) for v in x)} "
                        f"{predict(nodes, roots, baseline, x)!r}\n")
    print(f"wrote {os.path.relpath(fixture, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", default="h100", choices=sorted(SM_COUNT))
    ap.add_argument("--ktune", default=os.path.join(ROOT, "build", "ktune"),
                    help="for the rules' defaults in the cross-validation")
    ap.add_argument("--no-write", action="store_true", help="cross-validate only")
    ap.add_argument("--no-cv", action="store_true", help="fit and write only")
    args = ap.parse_args()
    import sklearn
    from sklearn.ensemble import HistGradientBoostingRegressor
    all_trials = default_eval.load_trials(default_eval.files_for(args.gpu), 30)
    trials = {k: v for k, v in sorted(all_trials.items())
              if k[0] == "bf16" and in_domain(dims_of(k[1]))}
    keys = list(trials)
    X, Y, G, K = dataset(trials, SM_COUNT[args.gpu])
    print(f"{args.gpu}: {len(keys)} problems in the domain, {len(Y)} timed points")
    if not args.no_cv:
        cross_validate(keys, X, Y, G, K, rule_defaults(args.ktune, args.gpu, keys))
    if not args.no_write:
        model = HistGradientBoostingRegressor(**HGB).fit(X, Y)
        write_model(args.gpu, model, trials, X, K, G, sklearn.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
