#!/bin/bash
# one-off (session 18, deleted after): tests of HEAD + col_groups patch + queue helper, memcheck, GPU pytest, SDDMM col_groups probe
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
G='-gencode arch=compute_90a,code=sm_90a'
BSK_COMMIT=$1 bench/run_gpu.sh tests py 2>&1 | tail -12
for t in gpu_hopper_spmm_pattern_cache gpu_hopper_small_pattern_cache gpu_hopper_sddmm_col_groups gpu_hopper_sddmm_malformed_indices_safe gpu_hopper_spmm_malformed_indices_safe; do
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests $t > /tmp/mc_$t.log 2>&1
  echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc_$t.log | tail -1) $(tail -1 /tmp/mc_$t.log)" | tee -a $OUT/san.txt
done
make JOBS=16 GENCODE_PORTABLE="$G" probes > /tmp/probes.log 2>&1 || tail -20 /tmp/probes.log
for d in 0.5 0.1 0.25; do timeout 100 build/bin/sddmm_probe --block 64 --groups --d $d --iters 15 2>&1 | tee -a $OUT/sddmm_groups.txt; done
