#!/bin/bash
# hopper_fabric.sh — session 9: what crosses the H100's L2 fabric in the b128 SpMM, by operation and cause.
# One device run: build (sm_90a), the gpu_hopper tests, the timing probe (hopper_probe --nodefault --fabric:
# default vs row groups vs the timing-only diagnostics that drop one traffic source), ncu with the L2 / fabric /
# DRAM counters split by operation and lookup result (names checked against `ncu --query-metrics --chip gh100`
# first: only those the installed ncu knows are asked for), memcheck on the partition-queue test.
# Usage (device, repo root): bash bench/hopper_fabric.sh; logs in $OUT. FAB_TESTS=0 / FAB_NCU=0 / FAB_PROBE=0 skip.
set -o pipefail
B=${HOPPER_BUILD:-build-hopper2}
OUT=${OUT:-/tmp/fabric_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/bin/bsk_tests $B/bin/hopper_probe \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s; C7520 lines: $(grep -c C7520 "$OUT/build.log"); spill lines: $(grep -c 'spill' "$OUT/build.log")"
res_tests="not run"; res_mem="not run"; res_ncu="not run"; res_probe="not run"
if [ "${FAB_TESTS:-1}" = 1 ]; then
    : > "$OUT/tests.log"
    res_tests=""
    for f in ${FAB_TEST_FILTERS:-gpu_hopper}; do
        t1=$(date +%s)
        timeout ${FAB_TEST_TIMEOUT:-150} $B/bin/bsk_tests $f > "$OUT/tests_one.log" 2>&1
        rc=$?
        cat "$OUT/tests_one.log" >> "$OUT/tests.log"
        echo "[$f: rc=$rc, $(( $(date +%s) - t1 )) s]" >> "$OUT/tests.log"
        grep -v "^ok " "$OUT/tests_one.log" | head -10
        res_tests="$res_tests [$f: rc=$rc $(( $(date +%s) - t1 )) s $(tail -1 "$OUT/tests_one.log")]"
    done
    rm -f "$OUT/tests_one.log"
    echo "tests: $(( $(date +%s) - t0 )) s"
fi
if [ "${FAB_PROBE:-1}" = 1 ]; then
    timeout ${FAB_PROBE_TIMEOUT:-200} $B/bin/hopper_probe --nodefault ${FAB_PROBE_ARGS:---fabric} > "$OUT/probe.log" 2>&1
    res_probe="rc=$?"
    echo "probe: $(( $(date +%s) - t0 )) s"
fi
if [ "${FAB_NCU:-1}" = 1 ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    "$NCU" --query-metrics --chip gh100 > "$OUT/ncu_query.txt" 2>&1
    grep -o '^[a-z0-9_]*ltcfabric[a-z0-9_]*' "$OUT/ncu_query.txt" | sort -u > "$OUT/ncu_fabric_names.txt"
    want="gpu__time_duration dram__bytes_read dram__bytes_write
lts__t_sectors_srcunit_ltcfabric lts__t_requests_srcunit_ltcfabric
lts__t_sectors_srcunit_ltcfabric_op_read lts__t_sectors_srcunit_ltcfabric_op_write
lts__t_sectors_srcunit_ltcfabric_op_membar lts__t_sectors_srcunit_tex_op_membar lts__t_sectors_op_membar
lts__t_sectors_srcunit_ltcfabric_lookup_hit lts__t_sectors_srcunit_ltcfabric_lookup_miss
lts__t_sectors_srcunit_ltcfabric_op_atom lts__t_sectors_srcunit_ltcfabric_op_red
lts__t_sectors_srcunit_ltcfabric_op_read_lookup_hit lts__t_sectors_srcunit_ltcfabric_op_read_lookup_miss
lts__t_sectors_srcunit_ltcfabric_op_write_lookup_hit lts__t_sectors_srcunit_ltcfabric_op_write_lookup_miss
lts__t_sectors_srcunit_tex_op_read lts__t_sectors_srcunit_tex_op_write
lts__t_sectors_srcunit_tex_op_read_lookup_hit lts__t_sectors_srcunit_tex_op_read_lookup_miss
lts__t_sectors_srcunit_tex_op_write_lookup_hit lts__t_sectors_srcunit_tex_op_write_lookup_miss
lts__t_sectors_op_read lts__t_sectors_op_write lts__t_sectors_srcnode_gpc
lts__d_sectors_fill_device lts__d_sectors_fill_sysmem
lts__ltcfabric2ltc_cycles_active lts__lts2ltcfabric_cycles_active lts__lts2xbar_cycles_active_realtime
lts__xbar2lts_cycles_active lts__t_sectors lts__t_tag_requests"
    mets=""
    for m in $want; do
        if grep -q "^$m " "$OUT/ncu_query.txt"; then
            case $m in
                *cycles_active*|lts__t_sectors|lts__t_tag_requests) mets="$mets,$m.avg.pct_of_peak_sustained_elapsed" ;;
                *) mets="$mets,$m.sum" ;;
            esac
        else
            echo "ncu: no metric $m"
        fi
    done
    mets=${mets#,}
    echo "ncu metrics: $mets" > "$OUT/ncu.log"
    timeout ${FAB_NCU_TIMEOUT:-240} "$NCU" --clock-control none -k regex:'spmm_kernel|gemm|nvjet|xmma|cutlass' \
        --metrics "$mets" $B/bin/hopper_probe --ncu --nodefault ${FAB_NCU_ARGS:---fabric} >> "$OUT/ncu.log" 2>&1
    res_ncu="rc=$?"
    echo "ncu: $(( $(date +%s) - t0 )) s"
fi
if [ "${FAB_SAN:-1}" = 1 ]; then
    t1=$(date +%s)
    timeout ${FAB_SAN_TIMEOUT:-120} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests \
        ${FAB_SAN_TEST:-gpu_hopper_spmm_partition_queues} > "$OUT/memcheck.log" 2>&1
    res_mem="${FAB_SAN_TEST:-gpu_hopper_spmm_partition_queues}: rc=$? $(( $(date +%s) - t1 )) s $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
echo "tests: $res_tests"
echo "memcheck: $res_mem"
echo "ncu: $res_ncu; probe: $res_probe"
# ncu, compact: one block per kernel
awk '/^ncu: /{print} /^  [A-Za-z_].*\(.*\)x\(/{n=$1; sub(/<.*/,"",n); print "== " n} /__/ && NF>=3 && !/^ncu metrics/{printf "   %s %s %s\n", $1, $(NF), $(NF-1)}' \
    "$OUT/ncu.log" 2>/dev/null | tail -260 > "$OUT/ncu_compact.txt"
grep -c "" "$OUT/ncu_compact.txt" 2>/dev/null
sed -n '/^L2-partition/p;/^cuBLAS/p' "$OUT/probe.log" 2>/dev/null
sed -n '/^== summary/,$p' "$OUT/probe.log" 2>/dev/null
