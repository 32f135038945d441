#!/bin/bash
# attention_hopper_probe.sh — one device run for the Hopper attention kernel (src/cuda/hopper/attention_*):
# build (sm_90a only), the attention tests (CPU + GPU, the Hopper ones assert the Hopper kernel ran), the
# benchmark (`bsk attention`, Hopper kernel first, mma.sync kernel timed alongside), compute-sanitizer memcheck
# on the short Hopper tests; a summary last. Logs and the JSON in $OUT.
# Usage (device machine, repo root): bench/attention_hopper_probe.sh [extra bsk attention args...]
#   ATTN_BUILD=dir (default build-attnh); ATTN_SAN=0 skips memcheck; ATTN_BENCH=0 skips the benchmark.
set -o pipefail
B=${ATTN_BUILD:-build-attnh}
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' all > "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUOBJ" --dump-sass $B/src/cuda/hopper/attention_hopper.o > "$OUT/sass.txt" 2>/dev/null
res_sass=$(awk '/Function :/{f=$3} /HGMMA/{n[f]++} /LDL|STL/{s[f]++} END{for (k in n) printf "%s HGMMA=%d LDL/STL=%d; ", substr(k,1,60), n[k], s[k]}' "$OUT/sass.txt")
res_tests="not run"; res_mem="not run"; res_bench="not run"
timeout ${ATTN_TEST_TIMEOUT:-70} $B/bin/bsk_tests attn > "$OUT/tests.log" 2>&1
rc=$?
grep -v "^ok " "$OUT/tests.log" | head -40
res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
hung=0
if [ $rc = 124 ]; then echo "tests: TIMED OUT (hang?)"; hung=1; fi
echo "tests: $(( $(date +%s) - t0 )) s"
if [ "${ATTN_BENCH:-1}" = 1 ] && [ $hung = 0 ]; then
    timeout ${ATTN_BENCH_TIMEOUT:-70} $B/bin/bsk attention --variant 4 --compare --json "$OUT/attention_hopper.json" "$@" \
        > "$OUT/bench.log" 2>&1
    res_bench="rc=$?"
    echo "bench: $(( $(date +%s) - t0 )) s"
fi
if [ "${ATTN_SAN:-1}" != 0 ] && [ $hung = 0 ]; then
    timeout ${ATTN_SAN_TIMEOUT:-40} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests \
        gpu_attn_hopper_long > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -c '^ok ' "$OUT/memcheck.log") ok"
    echo "sanitizer: $(( $(date +%s) - t0 )) s"
fi
echo "================ summary"
echo "sass:     $res_sass"
echo "tests:    $res_tests"
echo "memcheck: $res_mem"
echo "bench:    $res_bench"
cat "$OUT/bench.log" 2>/dev/null | grep -v "^$" | cut -c1-230
