#!/usr/bin/env bash
# On the GPU machine, from the repo root (bundle in $BUNDLE, default .gpu): early1 (gemm1's weight
# rows asked of L2 before its wait for the alignment) and early2 (gemm2 launched from gemm1's
# start, its own rows asked of L2 before its wait) measured on the rows a database already
# holds. For each setting of VARIANTS, a copy of DB whose MoE best rows at the given token counts
# take it (only rows where it is valid: impl1=0 for early1, impl1=impl2=0 for early2; everything
# else as tuned) is benched with benchmarks/moe_bench.py, between two runs of DB itself (the
# repeat shows the drift), each with its own output folder; the summaries' graph times are
# printed after each run.
# Usage: OUT=... [DB=db/shipped/h200.db] [LAYERS=deepseek,mixtral] [TOKENS=16,64,128]
#        [VARIANTS="early1=512 early2=2 early1=512,early2=2"] bash benchmarks/moe/early_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/early}
B=${BUNDLE:-.gpu}
DB=${DB:-db/shipped/h200.db}
LAYERS=${LAYERS:-deepseek,mixtral}
TOKENS=${TOKENS:-16,64,128}
VARIANTS=${VARIANTS:-early1=512 early2=2 early1=512,early2=2}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
dbs=("$DB")
for v in $VARIANTS; do
  name=$(echo "$v" | tr ',=' '_-')
  python3 - "$DB" "$OUT/$name.db" "$v" "$TOKENS" <<'PY'
import re, shutil, sqlite3, sys
src, dst, setting, tokens = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4].split(","))
shutil.copy(src, dst)
con = sqlite3.connect(dst)
rows = con.execute("SELECT rowid, problem_key, params_key FROM best WHERE op = 'moe'").fetchall()
changed = 0
for rowid, problem, params in rows:
    t = re.search(r"(?:^|,)t=(\d+)", problem).group(1)
    p = params.split(",")
    ok = "impl1=0" in p and ("early2" not in setting or "impl2=0" in p)
    if t in tokens and ok and "early" not in params:
        con.execute("UPDATE best SET params_key = ? WHERE rowid = ?",
                    (params + "," + setting, rowid))
        changed += 1
con.commit()
print(f"{dst}: {setting} on {changed} moe rows at t in {sorted(tokens, key=int)}")
PY
  dbs+=("$OUT/$name.db")
done
dbs+=("$DB")
run=0
for db in "${dbs[@]}"; do
  run=$((run + 1))
  dir="$OUT/run$run-$(basename "$db" .db)"
  mkdir -p "$dir"
  python3 benchmarks/moe_bench.py --lib "$B/lib/libktune.so" --db "$db" --out "$dir" \
    --layers "$LAYERS" --tokens "$TOKENS" --rounds 2 \
    --command "DB=$db benchmarks/moe/early_ab.sh" >"$dir/bench.log" 2>&1
  echo "== run $run: $db (rc $?)"
  sed -n '/==== summary/,$p' "$dir/bench.log" | grep -E "^(deepseek|mixtral|correctness)"
done
