#!/bin/bash
# small_probe.sh — one device run for the small-block Hopper SpMM (b = 32 / 16): build (sm_90a only), the
# gpu_hopper_small tests, bench/small_probe.c (cuBLAS vs bsk, variants / diag), optionally a -DBSK_SMALL_PROF build
# of the same probe (cycle counters), memcheck on the small tests last. Logs in $OUT; the probe tables last.
# Usage (device machine, repo root): bench/small_probe.sh [probe args...]
#   SMALL_TESTS=0 skips the tests; SMALL_PROF="args" runs the counter build with these probe args (built in the
#   background while the tests run); SMALL_SAN=0 skips memcheck, SMALL_SAN_TESTS="filter ..." (default
#   gpu_hopper_small) runs it once per filter; SMALL_BUILD=dir (default build-small); SMALL_BENCH="args": also
#   `bsk bench spmm args` (cuBLAS, cuSPARSE BSR / Blocked-ELL and bsk in one run), its table in bench.txt.
set -o pipefail
B=${SMALL_BUILD:-build-small}
OUT=${OUT:-/tmp/small_out}
mkdir -p "$OUT"
G='-gencode arch=compute_90a,code=sm_90a'
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE="$G" $B/bin/bsk_tests $B/bin/small_probe ${SMALL_BENCH:+$B/bin/bsk} > "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s; C7520 lines: $(grep -c C7520 "$OUT/build.log"); spills: $(grep -c 'bytes spill' "$OUT/build.log")"
prof_pid=
if [ -n "${SMALL_PROF:-}" ]; then # the counter build (only the small kernel's object differs), in the background
    ( rm -rf $B-prof && cp -a $B $B-prof && rm -f $B-prof/src/cuda/hopper/spmm_small_hopper.o &&
        rm -f $B-prof/bin/small_probe &&
        make BUILD=$B-prof JOBS=16 GENCODE_PORTABLE="$G" NVCC_EXTRA=-DBSK_SMALL_PROF $B-prof/bin/small_probe > "$OUT/build_prof.log" 2>&1 ||
        echo "PROF BUILD FAILED" >> "$OUT/build_prof.log" ) &
    prof_pid=$!
fi
if command -v cuobjdump > /dev/null; then
    cuobjdump --dump-sass $B/src/cuda/hopper/spmm_small_hopper.o | awk '/Function :/{f=$3} /HGMMA/{h[f]++} /LDL|STL/{l[f]++}
        END{for (k in h) printf "%d HGMMA %d LDL/STL %s\n", h[k], l[k], k}' | sed 's/_ZN9bsk_small17small_spmm_kernelINS_8SmallCfg//' | sort -k5 > "$OUT/sass_counts.txt"
    echo "sass: $(wc -l < "$OUT/sass_counts.txt") kernels, with local memory: $(awk '$3 > 0' "$OUT/sass_counts.txt" | wc -l)"
fi
res_tests="not run"
if [ "${SMALL_TESTS:-1}" = 1 ]; then
    timeout ${SMALL_TEST_TIMEOUT:-120} $B/bin/bsk_tests gpu_hopper_small > "$OUT/tests.log" 2>&1
    rc=$?
    grep -v "^ok " "$OUT/tests.log" | tail -20
    res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
    echo "tests: $(( $(date +%s) - t0 )) s"
fi
[ -n "$prof_pid" ] && wait $prof_pid ; echo "prof build done: $(( $(date +%s) - t0 )) s"
if [ -n "${SMALL_BENCH:-}" ]; then
    timeout ${SMALL_BENCH_TIMEOUT:-120} $B/bin/bsk bench spmm $SMALL_BENCH > "$OUT/bench.txt" 2>&1
    echo "bench rc=$?: $(( $(date +%s) - t0 )) s"
fi
if [ -n "${SMALL_PROF:-}" ] && [ -x $B-prof/bin/small_probe ]; then
    timeout ${SMALL_PROF_TIMEOUT:-90} $B-prof/bin/small_probe $SMALL_PROF > "$OUT/probe_prof.log" 2>&1
    echo "prof probe rc=$?: $(( $(date +%s) - t0 )) s"
fi
if [ $# -gt 0 ]; then
    timeout ${SMALL_PROBE_TIMEOUT:-150} $B/bin/small_probe "$@" > "$OUT/probe.log" 2>&1
    echo "probe rc=$?: $(( $(date +%s) - t0 )) s"
fi
res_mem="not run"
if [ "${SMALL_SAN:-1}" != 0 ]; then
    res_mem=
    : > "$OUT/memcheck.log"
    for f in ${SMALL_SAN_TESTS:-gpu_hopper_small}; do
        timeout ${SMALL_SAN_TIMEOUT:-90} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests $f \
            > "$OUT/memcheck_$f.log" 2>&1; rc=$?
        cat "$OUT/memcheck_$f.log" >> "$OUT/memcheck.log" && rm -f "$OUT/memcheck_$f.log"
        res_mem="$res_mem | $f rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -E '^[0-9]+ passed' "$OUT/memcheck.log" | tail -1)"
        echo "memcheck $f: $(( $(date +%s) - t0 )) s"
    done
fi
echo "tests: $res_tests"
echo "memcheck: $res_mem"
[ -f "$OUT/bench.txt" ] && tail -30 "$OUT/bench.txt"
[ -f "$OUT/probe_prof.log" ] && sed -n '/^== summary/,$p' "$OUT/probe_prof.log"
[ -f "$OUT/probe.log" ] && sed -n '/^== summary/,$p' "$OUT/probe.log"
true
