#!/usr/bin/env bash
# On the GPU machine (carry the bundle, G=.gpu by default): flash_decode's merge=1 (the splits
# merged in a thread block cluster, no combine kernel) against merge=0 (the combine kernel).
#   test:  gpu_decode_test's cluster cases (the combine's bits at 2-16 splits, the reference, a
#          graph replay), or the cases TEST_FILTER names
#   sweep: an exhaustive sweep of each shape into $OUT/m.db; every merge=1 point is paired with
#          the same tiles at merge=0 (same sweep), and the best of each is printed
#   bench: benchmarks/run_decode.sh on the issue's two bar shapes (runtime and cuDNN, same process)
# STEP: any of "test sweep bench" (default all). SHAPES_M: the sweep's shapes (default: bar 2's
# family at 32768 and 8192 keys, bar 1 and its b=8 point).
set -u
G=${G:-.gpu}
export LD_LIBRARY_PATH=$PWD/$G/lib KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$(mktemp -d)}
STEP=${STEP:-test sweep bench}
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
date -u
if [[ $STEP == *test* ]]; then
  timeout ${TEST_LIMIT:-240} $G/tests/gpu_decode_test --gtest_filter="${TEST_FILTER:-*ClusterMerge*}" \
    > $OUT/test.log 2>&1
  echo "gpu_decode_test ${TEST_FILTER:-*ClusterMerge*} rc=$?"
  grep -E "Failure|^\[  (PASSED|FAILED) " $OUT/test.log | head -8
fi
if [[ $STEP == *sweep* ]]; then
  for s in ${SHAPES_M:-b=1,hq=64,hkv=8,nq=1,nk=32768,d=128 b=8,hq=32,hkv=8,nq=1,nk=4096,d=128 \
           b=1,hq=64,hkv=8,nq=1,nk=8192,d=128 b=16,hq=32,hkv=8,nq=1,nk=4096,d=128}; do
    timeout $(( ${SWEEP_LIMIT:-60} + 30 )) $G/bin/ktune sweep --op flash_decode --dtype bf16 \
      --shape $s --time-limit ${SWEEP_LIMIT:-60} --db $OUT/m.db > $OUT/sweep-$s.log 2>&1
    echo "sweep $s rc=$? $(grep -E '^  best:' -A1 $OUT/sweep-$s.log | tr -s ' ' | tr '\n' ' ')"
  done
  $G/bin/ktune db export --db $OUT/m.db --op flash_decode --format csv -o $OUT/trials.csv
  python3 - "$OUT/trials.csv" $OUT/sweep-*.log <<'PY'
import csv, re, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["median_us"]]
t = {(r["problem_key"], r["params_key"]): float(r["median_us"]) for r in rows}
# The built-in default of each sweep (its log), its trial, and the same tiles at the other merge.
print("default (sweep log) against the same tiles at the other merge value, and the best:")
for log in sys.argv[2:]:
    text = open(log).read()
    prob = re.search(r"^flash_decode \S+ (\S+) on", text, re.M)
    dflt = re.search(r"default: (\S+)", text)
    if not prob or not dflt:
        continue
    p, d = prob.group(1), dflt.group(1)
    other = d[:-len(",merge=1")] if d.endswith(",merge=1") else d + ",merge=1"
    best = min(v for (q, _), v in t.items() if q == p)
    if (p, d) in t and (p, other) in t:
        print(f"  {p.split(',causal')[0]}: default {d} {t[(p, d)]:.1f} us, other merge "
              f"{t[(p, other)]:.1f} us (default / other {t[(p, d)] / t[(p, other)]:.3f}), "
              f"best {best:.1f} (default / best {t[(p, d)] / best:.3f})")
print(len(rows), "ok trials; merge=1 against the same tiles at merge=0 (time ratio):")
for prob in sorted({p for p, _ in t}):
    pairs = [(v / t[(p, k.replace(",merge=1", ""))], k, v, t[(p, k.replace(",merge=1", ""))])
             for (p, k), v in t.items()
             if p == prob and k.endswith(",merge=1") and (p, k.replace(",merge=1", "")) in t]
    m0 = min((v, k) for (p, k), v in t.items() if p == prob and not k.endswith(",merge=1"))
    m1 = min(((v, k) for (p, k), v in t.items() if p == prob and k.endswith(",merge=1")),
             default=(float("nan"), "-"))
    print(f"{prob.split(',causal')[0]}: best merge=0 {m0[0]:.1f} us ({m0[1]}), "
          f"best merge=1 {m1[0]:.1f} us ({m1[1]}), ratio {m1[0] / m0[0]:.3f}")
    if pairs:
        r = [x[0] for x in pairs]
        print(f"  {len(r)} pairs: median {statistics.median(r):.3f} min {min(r):.3f} "
              f"max {max(r):.3f}; by splits: " + ", ".join(
                  f"{s}: {statistics.median([x[0] for x in pairs if x[1].startswith(f'splits={s},')]):.3f}"
                  for s in (2, 4, 8, 16)
                  if any(x[1].startswith(f"splits={s},") for x in pairs)))
PY
fi
if [[ $STEP == *bench* ]]; then
  mkdir -p $OUT/bench
  OUT=$OUT/bench BUNDLE=$G SHAPES=${SHAPES:-0,1} timeout ${BENCH_LIMIT:-300} \
    bash benchmarks/run_decode.sh > $OUT/bench.log 2>&1
  echo "run_decode.sh rc=$?"; tail -6 $OUT/bench.log | cut -c1-400
fi
date -u
