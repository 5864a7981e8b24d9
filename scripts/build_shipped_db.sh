#!/usr/bin/env bash
# Builds a shipped database for the GPU(s) of this machine from every plan in plans/: the plans'
# problems (each once, in the order of the files) are swept into one working database, the MoE
# token buckets with the op's own (staged) strategy and the rest with the model strategy
# (resumable: run the same command again after a kill), then `ktune db ship` writes OUT with the
# devices, each problem's best row, its trial and the default's trial. (MoE's space is too large
# to list, and the model strategy's 96 proposals per bucket left 2 of 6 H200 buckets re-swept on
# 2026-12-02 2.4-5 % behind the staged sweep: benchmarks/results/moe-small-t-h200-2026-12-02.md.)
#   scripts/build_shipped_db.sh OUT [WORK_DB] [extra ktune sweep options, e.g. --devices all]
#   scripts/build_shipped_db.sh db/shipped/h200.db /tmp/h200-sweep.db
#   KTUNE=.gpu/bin/ktune scripts/build_shipped_db.sh OUT WORK --dry-run   (no GPU: the plan only)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/build_shipped_db.sh OUT [WORK_DB] [ktune sweep options]}
work=${2:-${out%.db}-sweep.db}
shift $(( $# >= 2 ? 2 : 1 ))
ktune=${KTUNE:-ktune}
plan=$(mktemp --suffix=.txt)
moe_plan=$(mktemp --suffix=.txt)
trap 'rm -f "$plan" "$moe_plan"' EXIT
# One plan of every problem line of plans/*.txt, each line once (comments and blanks dropped).
for f in plans/*.txt; do
  grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$f" | sed 's/[[:space:]]*#.*$//'
done | awk '!seen[$0]++' > "$plan"
echo "build_shipped_db: $(wc -l < "$plan") problem lines from $(ls plans/*.txt | wc -l) plans -> $work"
grep '^moe[[:space:]]' "$plan" > "$moe_plan" || true
sed -i '/^moe[[:space:]]/d' "$plan"
if [ -s "$plan" ]; then "$ktune" sweep --plan "$plan" --strategy model --db "$work" "$@"; fi
if [ -s "$moe_plan" ]; then "$ktune" sweep --plan "$moe_plan" --db "$work" "$@"; fi
for a in "$@"; do [ "$a" = --dry-run ] && exit 0; done
"$ktune" db ship "$work" "$out"
# Every sweep measured its default first, so each row has the default's trial beside it (what the
# lookup reads to judge a row as a neighbour); a row without one is listed and fails the build.
if ! "$ktune" db defaults --db "$out" --check > "${out%.db}-unjudged.txt"; then
  echo "build_shipped_db: rows without their default's trial, listed in ${out%.db}-unjudged.txt" >&2
  exit 1
fi
rm -f "${out%.db}-unjudged.txt"
