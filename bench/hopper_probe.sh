#!/bin/bash
# hopper_probe.sh — one device run for the Hopper SpMM: build (sm_90a only), the gpu_hopper tests, the probe
# (cuBLAS vs bsk at 8192^3), optionally an Nsight Compute pass, compute-sanitizer (last: the slowest and least
# likely to change), and the probe's E table printed last. Logs in $OUT.
# Usage (on the device machine, from the repo root): bench/hopper_probe.sh [probe args...]
#   HOPPER_BUILD=dir (default build-hopper2); HOPPER_TESTS=0 skips the tests; HOPPER_SAN=0 skips memcheck,
#   HOPPER_SAN=2 adds memcheck on the tails test and racecheck; HOPPER_NCU=1 adds the ncu pass.
#   HOPPER_TEST_FILTERS="f1 f2" (default gpu_hopper): the test filters run, one bsk_tests call each;
#   HOPPER_SAN_TESTS="t1 t2": more tests under memcheck; HOPPER_NCU_ARGS: the probe's arguments under ncu
#   (default --ncu); HOPPER_NCU_METRICS=1: a metric list (time, DRAM bytes, L2 hit rate / bytes / throughput)
#   (+ the L2 fabric and L2 -> crossbar activity, session 8) instead of the sections. The build log is grepped for C7520 (ptxas serialising wgmma).
set -o pipefail
B=${HOPPER_BUILD:-build-hopper2}
OUT=${OUT:-/tmp/hopper_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/bin/bsk_tests $B/bin/hopper_probe \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s; C7520 lines: $(grep -c C7520 "$OUT/build.log")"
res_tests="not run"; res_mem="not run"; res_race="not run"; res_ncu="not run"
if [ "${HOPPER_TESTS:-1}" = 1 ]; then
    res_tests=""
    : > "$OUT/tests.log"
    for f in ${HOPPER_TEST_FILTERS:-gpu_hopper}; do
        timeout ${HOPPER_TEST_TIMEOUT:-100} $B/bin/bsk_tests $f > "$OUT/tests_one.log" 2>&1
        rc=$?
        cat "$OUT/tests_one.log" >> "$OUT/tests.log"
        grep -v "^ok " "$OUT/tests_one.log"
        res_tests="$res_tests [$f: rc=$rc $(tail -1 "$OUT/tests_one.log")]"
        if [ $rc = 124 ]; then echo "tests $f: TIMED OUT (hang?)"; HOPPER_SAN=0; fi
    done
    rm -f "$OUT/tests_one.log"
    echo "tests: $(( $(date +%s) - t0 )) s"
fi
timeout ${HOPPER_PROBE_TIMEOUT:-130} $B/bin/hopper_probe "$@" > "$OUT/probe.log" 2>&1
res_probe="rc=$?"
echo "probe: $(( $(date +%s) - t0 )) s"
if [ "${HOPPER_NCU:-0}" = 1 ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -n "$NCU" ]; then
        if [ "${HOPPER_NCU_METRICS:-0}" = 1 ]; then
            timeout ${HOPPER_NCU_TIMEOUT:-60} "$NCU" --clock-control none -k regex:'spmm_kernel' --metrics \
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum,\
lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_ltcfabric.sum,\
lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,\
lts__lts2xbar_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed $B/bin/hopper_probe ${HOPPER_NCU_ARGS:---ncu} > "$OUT/ncu.log" 2>&1
            res_ncu="rc=$?"
            awk '/__/{printf " %s=%s%s", $1, $3, $2} /^ncu: /{print "  | " $0}' "$OUT/ncu.log" | tail -40
        else
        timeout ${HOPPER_NCU_TIMEOUT:-60} "$NCU" --clock-control none --section SpeedOfLight \
            --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
            -k regex:'spmm_kernel|gemm|nvjet|xmma|cutlass' $B/bin/hopper_probe ${HOPPER_NCU_ARGS:---ncu} > "$OUT/ncu.log" 2>&1
        res_ncu="rc=$?"
        # one line per kernel: name, then the headline figures
        awk '/^ncu: /{print} /^  [A-Za-z_].*\(.*\)x\(/{n=$1; sub(/<.*/,"",n); printf "\n%s", n}
             /SM Frequency|^ +Duration|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|L2 Hit Rate |Max Bandwidth|Mem Busy|Executed Ipc Active/{
                 v=$NF; $NF=""; gsub(/  +/," "); printf " |%s%s", $0, v} END{print ""}' "$OUT/ncu.log" | tail -30
        fi
    else
        res_ncu="ncu not found"
    fi
    echo "ncu: $(( $(date +%s) - t0 )) s"
fi
if [ "${HOPPER_SAN:-1}" != 0 ]; then
    timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_malformed \
        > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="malformed: rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
    for tn in ${HOPPER_SAN_TESTS:-}; do
        timeout ${HOPPER_SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests $tn \
            >> "$OUT/memcheck.log" 2>&1; rc=$?
        res_mem="$res_mem | $tn: rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
    done
    if [ "${HOPPER_SAN:-1}" = 2 ]; then
        timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_tails \
            >> "$OUT/memcheck.log" 2>&1; rc=$?
        res_mem="$res_mem | tails: rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
        timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/bin/bsk_tests gpu_hopper_spmm_tails \
            > "$OUT/racecheck.log" 2>&1; rc=$?
        res_race="rc=$rc $(grep 'RACECHECK SUMMARY\|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
    fi
    echo "sanitizer: $(( $(date +%s) - t0 )) s"
fi
echo "tests: $res_tests"
echo "memcheck: $res_mem"
echo "racecheck: $res_race"
echo "ncu: $res_ncu; probe: $res_probe"
# the E table last
sed -n '/^cuBLAS/p' "$OUT/probe.log"
sed -n '/^== summary/,$p' "$OUT/probe.log"
[ -n "$(sed -n '/^== summary/p' "$OUT/probe.log")" ] || tail -40 "$OUT/probe.log"
