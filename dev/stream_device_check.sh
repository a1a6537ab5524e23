#!/usr/bin/env bash
# stream_device_check.sh: h3exec --device-memory (docs/streaming.md) on the H200, against the
# resident run of the same plan in the same call: latents bitwise equal (cmp), wall time
# (the report's median latency), peak device memory by the runtime (the report's "device
# peak": bytes cudaMalloc'd at once) and by NVML from outside (nvidia-smi memory.used every
# 100 ms; it also counts the CUDA context), and the streaming lines of the report.
#   dev/stream_device_check.sh STAGE OUT [SECTION...]
# STAGE: tests/gpu/stage.sh's folder built from this branch (it stages the plans below).
# Sections (default "tiny file full int8", about 6 minutes; `smallest` takes about 3 more, so
# run it in a call of its own):
#   tiny      tiny plans (bf16 with 7 layers, --int8 at dims 256 with 5 layers, Cache-DiT
#             and Spectrum with 5 layers) on cuda: resident vs the smallest budget (read from
#             the error of a 1-byte budget), one block more, and 3 more; the bf16 one also
#             with the CUDA graphs off. Every output bitwise equal to the resident run's
#   file      h3_mid_l4.plan (dims 2048, 4 layers) with a weights file (tests/reference/h3_ref.py
#             --make-weights, 431 MB): the stacks of 32 MiB and more are page-locked in place
#             (cudaHostRegister), the norms copied into pinned memory; resident vs the smallest
#             budget and 2 blocks more (a ring of 3), bitwise
#   full      h3_full_s3.plan (full dims, 3 steps, bf16, random weights made on the GPU):
#             resident vs --device-memory 24GiB
#   int8      h3_full_int8_s3.plan (the same with --int8): resident vs 24GiB
#   smallest  both full plans at the smallest budget the runtime names (ring of 1 slot)
#   sampleres, sample24  h3_full.plan (49 steps), resident and at 24GiB (about 4.5 minutes
#             each: one call each, back to back while the machine is warm; the second
#             compares with the first)
#   int8sampleres, int8sample24  the same for h3_full_int8.plan
# Outputs and reports are kept in STAGE/stream_check (an ignored folder that stays on the
# machine between calls while it is warm, so later sections compare with earlier calls' runs);
# the reports and NVML samples are copied to OUT.
# Pass: every "bitwise" line says "equal"; for the 24GiB runs "runtime peak" <= 25769803776
# bytes and "nvml peak" <= 24576 MiB; the time ratio (streamed / resident median latency)
# <= 1.05 for bf16 and <= 1.03 for --int8 (acceptance: the 49-step sample; the 3-step
# plans show the same per-step overhead). "hidden" is 1 - (streamed - resident time) /
# (copy time per step x steps): the share of the copies the compute hid.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: dev/stream_device_check.sh STAGE OUT [tiny file full int8 smallest sampleres sample24 int8sampleres int8sample24]" >&2
  exit 2
fi
STAGE=$(cd "$1" && pwd)
OUT=$2
shift 2
SECTIONS=${*:-tiny file full int8}
mkdir -p "$OUT" "$STAGE/stream_check"
OUT=$(cd "$OUT" && pwd)
KEEP=$STAGE/stream_check
BIN=$STAGE/bin
PLANS=$STAGE/plans
export H3_KERNEL_CACHE_DIR=$STAGE/kcache
BUDGET=${BUDGET:-24GiB} # the budget of the full-dims runs (the checks below are against 24 GiB)
failures=0

# run NAME LIMIT ARGS...: h3exec ARGS (report KEEP/NAME.txt, outputs KEEP/NAME.st) with NVML
# sampled alongside (KEEP/NAME.nvml), both copied to OUT; prints one line: rc, wall, median
# latency, runtime and NVML peaks, then the report's streaming lines
run() {
  local name=$1 limit=$2
  shift 2
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$KEEP/$name.nvml" 2>/dev/null &
  local smi=$!
  local t0=$(date +%s.%N)
  timeout "$limit" "$BIN/h3exec" "$@" --out "$KEEP/$name.st" > "$KEEP/$name.txt" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  cp "$KEEP/$name.txt" "$KEEP/$name.nvml" "$OUT/"
  local nvml=$(sort -n "$KEEP/$name.nvml" | tail -1)
  local med=$(grep -o 'median [0-9.]*' "$KEEP/$name.txt" | awk '{print $2}')
  local peak=$(sed -n 's/^  device peak      : .* (\([0-9]*\) bytes.*/\1/p' "$KEEP/$name.txt")
  printf '%-24s rc=%s wall %6.1f s  median %s ms  runtime peak %s bytes  nvml peak %s MiB\n' \
    "$name" "$rc" "$(awk "BEGIN { print $t1 - $t0 }")" "${med:-?}" "${peak:-?}" "${nvml:-?}"
  grep -E '^  (streaming|streamed|copies hidden) ' "$KEEP/$name.txt" | sed 's/^/    /'
  if [ "$rc" -ne 0 ]; then
    tail -n 5 "$KEEP/$name.txt" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

same() { # same A B: the outputs of runs A and B bitwise
  if cmp -s "$KEEP/$1.st" "$KEEP/$2.st"; then
    echo "bitwise $2 vs $1: equal"
  else
    echo "bitwise $2 vs $1: DIFFER (FAIL)"
    failures=$((failures + 1))
  fi
}

# smallest PLAN ARGS...: the smallest budget h3exec names for PLAN (the error of a 1-byte one)
smallest() {
  "$BIN/h3exec" "$@" --device-memory 1 2>&1 | sed -n 's/.*give --device-memory \([0-9]*\) .*/\1/p'
}

block_of() { # block_of NAME: a streamed block's bytes, from run NAME's report (a ring slot)
  python3 -c "
import re; t = open('$KEEP/$1.txt').read()
m = re.search(r'ring [0-9]+ x ([0-9.]+) (B|KiB|MiB|GiB)', t)
print(int(float(m.group(1)) * {'B': 1, 'KiB': 1024, 'MiB': 1 << 20, 'GiB': 1 << 30}[m.group(2)]) if m else 0)"
}

# compare RES STR STEPS LIMIT: bitwise, time ratio, hidden share of the copies, peaks vs 24 GiB
# (when both runs are in KEEP: from this call or an earlier one)
compare() {
  [ -f "$KEEP/$1.st" ] && [ -f "$KEEP/$2.st" ] || return 0
  same "$1" "$2"
  python3 - "$KEEP/$1.txt" "$KEEP/$2.txt" "$3" "$4" "$KEEP/$2.nvml" <<'PY' || failures=$((failures + 1))
import re, sys
res, st = open(sys.argv[1]).read(), open(sys.argv[2]).read()
steps, limit = int(sys.argv[3]), float(sys.argv[4])
nvml = [int(x) for x in open(sys.argv[5]).read().split() if x.isdigit()]
def med(t):
    m = re.search(r"median ([0-9.]+)", t)
    return float(m.group(1)) if m else float("nan")
r, s = med(res), med(st)
m = re.search(r"copy ([0-9.]+) ms per step", st)
copy = float(m.group(1)) * steps if m else float("nan")
hidden = 1 - max(0.0, s - r) / copy if copy == copy and copy > 0 else float("nan")
ok = True
ratio = s / r
ok &= ratio <= limit
print(f"time: resident {r:.1f} ms, streamed {s:.1f} ms, ratio {ratio:.4f} (limit {limit}): "
      f"{'PASS' if ratio <= limit else 'FAIL'}; copies {copy:.1f} ms per sample, hidden {100 * hidden:.1f} %")
m = re.search(r"device peak      : .* \(([0-9]+) bytes", st)
peak = int(m.group(1)) if m else -1
ok &= 0 <= peak <= 25769803776
print(f"runtime peak {peak} bytes vs 24 GiB = 25769803776: {'PASS' if 0 <= peak <= 25769803776 else 'FAIL'}")
top = max(nvml) if nvml else -1
ok &= 0 <= top <= 24576
print(f"nvml peak {top} MiB vs 24 GiB = 24576 MiB: {'PASS' if 0 <= top <= 24576 else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}

# full TAG PLAN WARMUP [ARGS...]: one run of a full-dims plan on cuda (GPU random weights)
full() {
  local tag=$1 plan=$2 warm=$3
  shift 3
  run "$tag" 290 "$PLANS/$plan" --backend cuda --weights random --seed 3 --warmup "$warm" \
    --iterations 1 "$@"
}

for section in $SECTIONS; do
  echo "=== $section"
  case $section in
  tiny)
    for p in h3_tiny_l7 h3_small_int8_l5 h3_tiny_high_l5 h3_tiny_spec_l5; do
      args=("$PLANS/$p.plan" --backend cuda --weights random --seed 3)
      run "${p}_resident" 120 "${args[@]}"
      low=$(smallest "${args[@]}")
      run "${p}_smallest" 120 "${args[@]}" --device-memory "${low:-1}"
      same "${p}_resident" "${p}_smallest"
      block=$(block_of "${p}_smallest")
      for extra in 1 3; do
        run "${p}_plus$extra" 120 "${args[@]}" --device-memory $(( ${low:-1} + extra * block + extra * 1024 ))
        same "${p}_resident" "${p}_plus$extra"
      done
    done
    H3_CUDA_GRAPHS=0 run h3_tiny_l7_nographs 120 "$PLANS/h3_tiny_l7.plan" --backend cuda \
      --weights random --seed 3 --device-memory $(( $(smallest "$PLANS/h3_tiny_l7.plan" --backend cuda) + 400000 ))
    same h3_tiny_l7_resident h3_tiny_l7_nographs
    ;;
  file)
    wdir=$(mktemp -d)
    python3 tests/reference/h3_ref.py --config tiny --set dim=2048 --set heads=16 --set head_dim=128 \
      --set ffn=4096 --set layers=4 --set text_dim=256 --make-weights "$wdir/w.safetensors" --seed 1
    args=("$PLANS/h3_mid_l4.plan" --backend cuda --weights "$wdir/w.safetensors")
    run mid_resident 120 "${args[@]}"
    low=$(smallest "${args[@]}")
    run mid_smallest 120 "${args[@]}" --device-memory "${low:-1}"
    same mid_resident mid_smallest
    run mid_plus2 120 "${args[@]}" --device-memory $(( ${low:-1} + 2 * $(block_of mid_smallest) + 2048 ))
    same mid_resident mid_plus2
    rm -rf "$wdir"
    ;;
  full)
    full full_resident h3_full_s3.plan 1
    full full_24g h3_full_s3.plan 1 --device-memory "$BUDGET"
    compare full_resident full_24g 3 1.05
    ;;
  int8)
    full int8_resident h3_full_int8_s3.plan 1
    full int8_24g h3_full_int8_s3.plan 1 --device-memory "$BUDGET"
    compare int8_resident int8_24g 3 1.03
    ;;
  smallest)
    for tag in full int8; do
      plan=h3_full_s3.plan
      [ "$tag" = int8 ] && plan=h3_full_int8_s3.plan
      low=$(smallest "$PLANS/$plan" --backend cuda --weights random)
      echo "smallest budget $tag: ${low:-?} bytes"
      full "${tag}_smallest" "$plan" 0 --device-memory "${low:-1}"
      [ -f "$KEEP/${tag}_resident.st" ] && same "${tag}_resident" "${tag}_smallest"
    done
    ;;
  sampleres) full sample_resident h3_full.plan 0 ;;
  sample24)
    full sample_24g h3_full.plan 0 --device-memory "$BUDGET"
    compare sample_resident sample_24g 49 1.05
    ;;
  int8sampleres) full int8sample_resident h3_full_int8.plan 0 ;;
  int8sample24)
    full int8sample_24g h3_full_int8.plan 0 --device-memory "$BUDGET"
    compare int8sample_resident int8sample_24g 49 1.03
    ;;
  *) echo "unknown section '$section'" >&2; failures=$((failures + 1)) ;;
  esac
done
echo "failures: $failures"
exit "$failures"
