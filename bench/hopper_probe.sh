#!/bin/bash
# hopper_probe.sh — one device run for the Hopper SpMM: build (sm_90a only), the gpu_hopper tests,
# compute-sanitizer memcheck + racecheck on a small case, then the probe (cuBLAS vs bsk at 8192^3).
# Usage (on the device machine, from the repo root): bench/hopper_probe.sh [probe args...]
#   HOPPER_SAN=0 skips the sanitizer step; HOPPER_TESTS=0 skips the tests.
set -o pipefail
B=build-hopper
OUT=${OUT:-/tmp/hopper_out}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/bin/bsk_tests $B/lib/libbsk.a \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
cc -std=c11 -O2 -Wall -Wextra -Iinclude -Isrc -I"$CUDA_HOME/include" bench/hopper_probe.c -o $B/bin/hopper_probe \
    $B/lib/libbsk.a -L"$CUDA_HOME/lib64" -lcublas -lcudart_static -ldl -lrt -lpthread -lm -lstdc++ \
    >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "PROBE BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
res_tests="not run"; res_mem="not run"; res_race="not run"
if [ "${HOPPER_TESTS:-1}" = 1 ]; then
    timeout 150 $B/bin/bsk_tests gpu_hopper 2>&1 | tee "$OUT/tests.log" | grep -v "^ok "
    rc=$?
    res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
    if [ $rc = 124 ]; then echo "tests: TIMED OUT (hang?)"; HOPPER_SAN=0; fi
fi
if [ "${HOPPER_SAN:-1}" = 1 ]; then
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_tails \
        > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="rc=$rc $(grep -c 'Invalid\|out of bounds' "$OUT/memcheck.log") invalid-access lines; $(grep 'ERROR SUMMARY' "$OUT/memcheck.log")"
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_malformed \
        >> "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="$res_mem | malformed: rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
    timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_cluster \
        >> "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="$res_mem | cluster: rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
    timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_tails \
        > "$OUT/racecheck.log" 2>&1; rc=$?
    res_race="rc=$rc $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi
timeout 200 $B/bin/hopper_probe "$@" 2>&1 | tee "$OUT/probe.log"
echo "tests: $res_tests"
echo "memcheck: $res_mem"
echo "racecheck: $res_race"
