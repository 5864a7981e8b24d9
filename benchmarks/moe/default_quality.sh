#!/usr/bin/env bash
# On the GPU machine, from the repo root (bundle of scripts/gpu_bundle.sh carried as $G): how good
# the MoE op's built-in defaults are on layers and token counts that no rule was read from. A
# MoE lookup never crosses e/k/h/i, so for a layer with no tuned rows the default is what a user
# runs. Each layer is swept (`ktune sweep --op moe`, the op's staged strategy) at token counts
# that are not the benchmark buckets; the sweep re-times the default beside its leaders, so
# "default / best" compares two times of one phase. The best is the staged sweep's, not an
# exhaustive optimum: the ratio is an upper bound on the default's quality.
#
# Usage: G=.gpu [LAYERS="name ..."] [TOKENS=3,40,300,2500] [SWEEP_LIMIT=s per sweep]
#        [DEADLINE=s: start no sweep that could end later than this after the first]
#        [K=path to ktune] [BUDGET=n] [TAG=prefix of the log names]
# BUDGET=2 on a database that already holds the problems' sweeps times this binary's default
# beside the stored best (the warm start's nearest point is the problem itself), in one phase:
# how an older or newer default rule compares with the same optimum.
#        bash benchmarks/moe/default_quality.sh
# One sweep per (layer, token count); one stopped at its limit resumes in a later call (same $DB). Logs and the
# database go under $OUT; the table (per layer and token count, geometric mean, worst) is last.
set -u
OUT=${OUT:-/tmp/moe-dq}
G=${G:-.gpu}
K=${K:-$G/bin/ktune}
TAG=${TAG:-}
DB=${DB:-$OUT/dq.db}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=$PWD/$G/lib:${LD_LIBRARY_PATH:-}
export KTUNE_CACHE_DIR=${KTUNE_CACHE_DIR:-$OUT/cache}
declare -A SHAPE=(
  # OLMoE-1B-7B: 64 experts of 1024, top 8 by softmax, not renormalised
  [olmoe]="e=64,k=8,h=2048,i=1024,routing=softmax"
  # Mixtral-8x22B
  [mixtral22]="e=8,k=2,h=6144,i=16384,routing=softmax_renorm"
  # gpt-oss-20b's expert shapes (32 experts, top 4, hidden = intermediate = 2880)
  [gptoss]="e=32,k=4,h=2880,i=2880,routing=softmax_renorm"
  # Qwen2-57B-A14B: 64 experts of 2560, top 8
  [qwen2]="e=64,k=8,h=3584,i=2560,routing=softmax"
  # DeepSeek-V3: 256 experts of 2048, top 8 of 4 groups out of 8, sigmoid scores
  [dsv3]="e=256,k=8,h=7168,i=2048,routing=sigmoid_group,n_group=8,topk_group=4"
  # no model: dims that are multiples of no GEMM tile
  [odd]="e=16,k=2,h=1000,i=2728,routing=softmax_renorm"
  # the check set of 2026-12-02, swept after the rows-per-expert rule was written:
  # Qwen1.5-MoE-A2.7B (60 experts of 1408, top 4), Phi-3.5-MoE (16 of 6400, top 2),
  # DBRX (16 of 10752, top 4)
  [qwen15]="e=60,k=4,h=2048,i=1408,routing=softmax"
  [phi35]="e=16,k=2,h=4096,i=6400,routing=softmax_renorm"
  [dbrx]="e=16,k=4,h=6144,i=10752,routing=softmax_renorm"
  # the second check set, swept after the rule's last change: Granite-3.0-1B-A400M (32 of 512,
  # top 8), DeepSeek-V2's expert shapes (160 of 1536, top 6; softmax here), a Llama-4-Scout-like
  # top-1 layer (16 of 8192), and dims that are multiples of no tile (24 experts of 1200, top 3)
  [granite]="e=32,k=8,h=1024,i=512,routing=softmax"
  [dsv2]="e=160,k=6,h=5120,i=1536,routing=softmax"
  [scout]="e=16,k=1,h=5120,i=8192,routing=softmax_renorm"
  [odd2]="e=24,k=3,h=1800,i=1200,routing=softmax_renorm"
  # not yet swept (a third check, for the rule of 2026-12-02 with its fused routing lanes):
  # Qwen3-235B-A22B (128 of 1536, top 8), JetMoE-8B (8 of 5632, top 2), Jamba (16 of 14336,
  # top 2), a Llama-4-Maverick-like top-1 layer (128 of 8192); e.g. TOKENS=2,24,200,1200
  [qwen3big]="e=128,k=8,h=4096,i=1536,routing=softmax_renorm"
  [jetmoe]="e=8,k=2,h=2048,i=5632,routing=softmax_renorm"
  [jamba]="e=16,k=2,h=4096,i=14336,routing=softmax_renorm"
  [maverick]="e=128,k=1,h=5120,i=8192,routing=softmax_renorm"
  # the final held-out set (stop 75, written before any run; no rule was read from these
  # layers): gpt-oss-120b (128 of 2880, top 4), Hunyuan-A13B (64 of 3072, top 8), ERNIE-4.5-21B-A3B
  # (64 of 1536, top 6), GLM-4.5-Air (128 of 1408, top 8, sigmoid scores, one group), Snowflake
  # Arctic (128 of 4864, top 2), MiniMax-Text-01 (32 of 9216, top 2), Qwen3-Coder-480B-A35B (160
  # of 2560, top 8); TOKENS=5,77,640,1900 (no benchmark bucket). Prediction (H100): best/default
  # geometric mean >= 0.95, worst >= 0.85, as on the H200's earlier sets (0.962-0.963).
  # (Kimi-K2's 384 experts are refused: e is at most 256.)
  [gptoss120]="e=128,k=4,h=2880,i=2880,routing=softmax_renorm"
  [hunyuan]="e=64,k=8,h=4096,i=3072,routing=softmax_renorm"
  [ernie]="e=64,k=6,h=2560,i=1536,routing=softmax_renorm"
  [glmair]="e=128,k=8,h=4096,i=1408,routing=sigmoid_group,n_group=1,topk_group=1"
  [arctic]="e=128,k=2,h=7168,i=4864,routing=softmax_renorm"
  [minimax]="e=32,k=2,h=6144,i=9216,routing=softmax_renorm"
  [qwen3coder]="e=160,k=8,h=6144,i=2560,routing=softmax_renorm"
  # the design layers of the bars (issue 8): Mixtral-8x7B and the DeepSeek-like layer
  [mixtral]="e=8,k=2,h=4096,i=14336,routing=softmax_renorm"
  [dslike]="e=64,k=8,h=2048,i=1408,routing=sigmoid_group,n_group=8,topk_group=4"
)
LAYERS=${LAYERS:-olmoe mixtral22 gptoss qwen2 dsv3 odd}
TOKENS=${TOKENS:-3,40,300,2500}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
for t in ${TOKENS//,/ }; do
  for layer in $LAYERS; do
    if [ -n "${DEADLINE:-}" ] && [ $(( $(date +%s) - t0 + ${SWEEP_LIMIT:-40} + 15 )) -gt "$DEADLINE" ]; then
      echo "sweep $layer t=$t skipped: DEADLINE=${DEADLINE} s would pass"; continue
    fi
    start=$(date +%s.%N)
    timeout $(( ${SWEEP_LIMIT:-40} + 60 )) $K sweep --op moe --dtype bf16 \
      --shape "${SHAPE[$layer]},t=$t" --time-limit ${SWEEP_LIMIT:-40} --budget ${BUDGET:-0} \
      --db "$DB" --json > "$OUT/logs/$TAG$layer-t$t.json" 2> "$OUT/logs/$TAG$layer-t$t.err"
    rc=$?
    echo "sweep $TAG$layer t=$t rc=$rc wall $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  done
done
python3 - "$OUT/logs" "$TOKENS" "$TAG" $LAYERS <<'EOF'
import json, math, sys
d, tokens, tag, layers = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4:]
print(f"{'layer':10} {'problem':70} {'default us':>11} {'best us':>10} {'best/default':>12}  left")
ratios = []
for layer, t in ((l, t) for l in layers for t in tokens):
    try:
        r = json.load(open(f"{d}/{tag}{layer}-t{t}.json"))
    except Exception as e:  # a sweep that died prints no JSON; its .err says why
        print(f"{layer:10} t={t}: no result ({e.__class__.__name__})")
        continue
    best, dflt = r.get("best"), r.get("default")
    if not best or not dflt:
        print(f"{layer:10} {r.get('problem', '?'):70} {'-':>11} {'-':>10} {'-':>12}")
        continue
    q = best["median_us"] / dflt["median_us"]
    ratios.append(q)
    print(f"{layer:10} {r['problem'][:70]:70} {dflt['median_us']:11.1f} {best['median_us']:10.1f}"
          f" {q:12.3f}  {r.get('not_measured', 0)}")
if ratios:
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"problems {len(ratios)}: geometric mean {g:.3f}, worst {min(ratios):.3f}")
EOF
tar czf "$OUT/${TAG}logs.tar.gz" -C "$OUT" logs
