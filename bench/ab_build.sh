#!/bin/bash
# ab_build.sh — a same-run A/B of a compile-time switch on the device machine: build A (the tree as it is, in
# build/) and B (a copy of build/ with the objects of AB_FILES rebuilt under NVCC_EXTRA="$AB_EXTRA"), then run
# each command of the argument list with A's and B's `bsk` alternated A B B A, every output into one log.
# Usage (device machine, repo root):
#   AB_EXTRA=-DBSK_NO_X AB_FILES="spmm_hopper sddmm_hopper" bench/ab_build.sh "bench spmm --blocks 64 ..." ...
# AB_TESTS="filter ..." runs `bsk_tests filter` on build A first (one run per filter), AB_SAN="filter ..." then
# compute-sanitizer memcheck on them. AB_TEST_TIMEOUT (s, default 300) bounds each test run; a test run that times
# out stops the script (a hang on A would hang its benchmarks too). Log: $OUT/ab.log (written as it goes: a cut-off
# run still brings it back).
set -o pipefail
OUT=${OUT:-/tmp/ab_out}
mkdir -p "$OUT"
G='-gencode arch=compute_90a,code=sm_90a'
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader | tee "$OUT/ab.log"
t0=$(date +%s)
make BUILD=build JOBS=16 GENCODE_PORTABLE="$G" all > "$OUT/build_a.log" 2>&1 || { tail -30 "$OUT/build_a.log"; echo "BUILD A FAILED"; exit 1; }
rm -rf build-b && cp -a build build-b
for f in ${AB_FILES:?AB_FILES: the objects to rebuild for B}; do rm -f build-b/src/cuda/hopper/$f.o; done
rm -f build-b/lib/* build-b/bin/*
make BUILD=build-b JOBS=16 GENCODE_PORTABLE="$G" NVCC_EXTRA="${AB_EXTRA:?}" build-b/bin/bsk > "$OUT/build_b.log" 2>&1 ||
    { tail -30 "$OUT/build_b.log"; echo "BUILD B FAILED"; exit 1; }
echo "builds: $(( $(date +%s) - t0 )) s; C7520: A $(grep -c C7520 "$OUT/build_a.log") B $(grep -c C7520 "$OUT/build_b.log");" \
     "spill lines: A $(grep -c 'bytes spill stores' "$OUT/build_a.log") B $(grep -c 'bytes spill stores' "$OUT/build_b.log")" | tee -a "$OUT/ab.log"
for f in ${AB_TESTS:-}; do
    timeout "${AB_TEST_TIMEOUT:-300}" build/bin/bsk_tests "$f" > "$OUT/tests_$f.log" 2>&1; rc=$?
    echo "tests $f (A): rc=$rc $(tail -1 "$OUT/tests_$f.log")" | tee -a "$OUT/ab.log"
    grep -E "^FAIL|failed \(" "$OUT/tests_$f.log" | head -10
    [ $rc = 124 ] && { tail -5 "$OUT/tests_$f.log"; echo "TESTS TIMED OUT: stop" | tee -a "$OUT/ab.log"; exit 1; }
done
for f in ${AB_SAN:-}; do
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests "$f" > "$OUT/memcheck_$f.log" 2>&1
    echo "memcheck $f (A): rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_$f.log" | tail -1)" | tee -a "$OUT/ab.log"
done
for cmd in "$@"; do
    for side in A B B A; do
        bin=build/bin/bsk; [ $side = B ] && bin=build-b/bin/bsk
        echo "=== $side ($AB_EXTRA on B): bsk $cmd" >> "$OUT/ab.log"
        timeout 280 $bin $cmd >> "$OUT/ab.log" 2>&1 || echo "rc=$?" >> "$OUT/ab.log"
    done
done
echo "total: $(( $(date +%s) - t0 )) s" | tee -a "$OUT/ab.log"
