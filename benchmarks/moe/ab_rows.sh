#!/usr/bin/env bash
# On the GPU machine (bundle in $G, default .gpu, carried): an A/B of a MoE row against
# variants of it, as the sweep times points (`ktune sweep --params`, one process, re-timed
# interleaved), stored in $ADB (default $OUT/ab.db) so that `ktune db merge` can take the
# fastest as a measured row.
# Usage: benchmarks/moe/ab_rows.sh SRC_DB T "VARIANT" ...   (a variant is name=value items put
#   over the row; "" times the row itself; "=PARAMS" times PARAMS whole instead; "@DB" or
#   "@DB,VARIANT" the row of another database for the same problem, with VARIANT over it)
# Prints each point's re-timed median (the sweep's --json "given") and the ratio to the row's,
# then the built-in default's (re-timed beside them).
# SHAPE: the problem key as the database writes it, {t} for the token count (default Mixtral's).
set -uo pipefail
G=${G:-.gpu}
OUT=${OUT:-/tmp/moe_ab}
ADB=${ADB:-$OUT/ab.db}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
src=$1 t=$2
shift 2
SHAPE=${SHAPE:-"e=8,k=2,h=4096,i=14336,t={t},routing=softmax_renorm,n_group=1,topk_group=1"}
shape=${SHAPE//\{t\}/$t}
row_of() {
  python3 - "$1" "$shape" <<'PY'
import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute(
    "select params_key from best where op = 'moe' and problem_key = ?", (sys.argv[2],)).fetchone()
print(r[0] if r else "")
PY
}
over() {  # PARAMS with the items of VARIANT put over it (replaced in place, else appended)
  python3 -c '
import sys
items = [kv.split("=", 1) for kv in sys.argv[1].split(",")]
for k, v in (kv.split("=", 1) for kv in sys.argv[2].split(",")):
    hit = [it for it in items if it[0] == k]
    if hit:
        hit[0][1] = v
    else:
        items.append([k, v])
print(",".join(k + "=" + v for k, v in items))' "$1" "$2"
}
row=$(row_of "$src")
[ -n "$row" ] || { echo "no moe row for t=$t in $src" >&2; exit 1; }
args=()
for v in "$@"; do
  case "$v" in
  "") args+=(--params "$row") ;;
  =*) args+=(--params "${v#=}") ;;
  @*)
    db=${v#@} db=${db%%,*} other=$(row_of "$db")
    [ -n "$other" ] || { echo "no moe row for t=$t in $db" >&2; exit 1; }
    case "$v" in *,*) other=$(over "$other" "${v#*,}") ;; esac
    args+=(--params "$other") ;;
  *) args+=(--params "$(over "$row" "$v")") ;;
  esac
done
log=$OUT/ab-$t.log
timeout 300 "$G/bin/ktune" sweep --op moe --shape "$shape" --dtype bf16 --db "$ADB" \
  "${args[@]}" --json >"$OUT/ab-$t.json" 2>"$log"
echo "ab t=$t rc=$?"
python3 - "$OUT/ab-$t.json" "$row" <<'PY'
import json, sys
path, row = sys.argv[1:]
try:
    res = json.load(open(path))
except ValueError:
    sys.exit(f"no sweep result in {path} (its log is beside it)")
res = res[0] if isinstance(res, list) else res
# The given points as the run re-timed them, interleaved with the default, in --params order.
given = [(g["params"], g["median_us"]) for g in res.get("given", []) if "median_us" in g]
base = next((us for p, us in given if p == row), None)
items = lambda key: dict(kv.split("=", 1) for kv in key.split(","))
a = items(row)
for p, us in given:
    b = items(p)
    # A tunable at its key default is left out of keys: shown as "name=(default)".
    extra = ",".join([f"{k}={v}" for k, v in b.items() if a.get(k) != v] +
                     [f"{k}=(default)" for k in a if k not in b]) or "(row)"
    print(f"  {us:9.1f} us  {base / us if base else float('nan'):.3f}x  {extra}")
d = res.get("default")
if d:
    print(f"  {d['median_us']:9.1f} us  {base / d['median_us'] if base else float('nan'):.3f}x"
          "  the built-in default")
PY
