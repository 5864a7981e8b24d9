#!/usr/bin/env bash
# On the GPU machine, from the repo root (bundle in $BUNDLE, default .gpu): early1 (gemm1's weight
# rows asked of L2 before its wait for the alignment) measured on the rows a database already
# holds. Copies of DB whose MoE best rows at the given token counts, where gemm1 is the mma.sync
# kernel (impl1=0), take early1=512 or 1024 (everything else as tuned) are benched against DB
# itself with benchmarks/moe_bench.py, in the order DB, 512, 1024, DB (the repeat shows the
# drift), each with its own output folder; the summaries' graph times are printed last.
# Usage: OUT=... [DB=db/shipped/h200.db] [LAYERS=deepseek,mixtral] [TOKENS=16,64,128]
#        bash benchmarks/moe/early_ab.sh
set -uo pipefail
OUT=${OUT:-/tmp/early}
B=${BUNDLE:-.gpu}
DB=${DB:-db/shipped/h200.db}
LAYERS=${LAYERS:-deepseek,mixtral}
TOKENS=${TOKENS:-16,64,128}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
for bytes in 512 1024; do
  python3 - "$DB" "$OUT/early$bytes.db" "$bytes" "$TOKENS" <<'PY'
import re, shutil, sqlite3, sys
src, dst, nbytes, tokens = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4].split(","))
shutil.copy(src, dst)
con = sqlite3.connect(dst)
rows = con.execute("SELECT rowid, problem_key, params_key FROM best WHERE op = 'moe'").fetchall()
changed = 0
for rowid, problem, params in rows:
    t = re.search(r"(?:^|,)t=(\d+)", problem).group(1)
    if t in tokens and "impl1=0" in params.split(",") and "early1=" not in params:
        con.execute("UPDATE best SET params_key = ? WHERE rowid = ?",
                    (params + ",early1=" + nbytes, rowid))
        changed += 1
con.commit()
print(f"{dst}: early1={nbytes} on {changed} moe rows at t in {sorted(tokens, key=int)}")
PY
done
run=0
for db in "$DB" "$OUT/early512.db" "$OUT/early1024.db" "$DB"; do
  run=$((run + 1))
  dir="$OUT/run$run-$(basename "$db" .db)"
  mkdir -p "$dir"
  python3 benchmarks/moe_bench.py --lib "$B/lib/libktune.so" --db "$db" --out "$dir" \
    --layers "$LAYERS" --tokens "$TOKENS" --rounds 2 \
    --command "DB=$db benchmarks/moe/early_ab.sh" >"$dir/bench.log" 2>&1
  echo "== run $run: $db (rc $?)"
  sed -n '/==== summary/,$p' "$dir/bench.log" | grep -E "^(deepseek|mixtral|correctness)"
done
