#!/bin/bash
# one-off (session 18, deleted after): final GPU tests at HEAD, memcheck, the SpMM benchmark grid
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
make JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' all > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
timeout 200 build/bin/bsk_tests gpu_ > $OUT/tests_gpu.log 2>&1; echo "tests gpu_ rc=$? $(tail -1 $OUT/tests_gpu.log)"; grep -E "^FAIL" $OUT/tests_gpu.log | head
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests gpu_hopper_sddmm_col_groups > /tmp/mc.log 2>&1
echo "memcheck gpu_hopper_sddmm_col_groups: rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc.log | tail -1)" | tee $OUT/san.txt
BSK_COMMIT=$1 bench/run_gpu.sh bench 2>&1 | tail -60
