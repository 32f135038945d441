#!/bin/bash
# one-off (session 18, deleted after): SDDMM balanced item cut — tests, memcheck, probes, train bench
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
G='-gencode arch=compute_90a,code=sm_90a'
make JOBS=16 GENCODE_PORTABLE="$G" all probes > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
build/bin/bsk_tests gpu_hopper_sddmm > $OUT/tests_sddmm.log 2>&1; echo "tests sddmm rc=$? $(tail -1 $OUT/tests_sddmm.log)"
build/bin/bsk_tests gpu_ > /tmp/tg.log 2>&1; echo "tests gpu_ rc=$? $(tail -1 /tmp/tg.log)"; grep -E "^FAIL" /tmp/tg.log | head
for t in gpu_hopper_sddmm_malformed_indices_safe gpu_hopper_sddmm_col_groups gpu_hopper_sddmm_split; do
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests $t > /tmp/mc.log 2>&1
  echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc.log | tail -1)"; done
P=$OUT/sddmm_cut_probe.txt
for a in "64 0.1" "64 0.25" "64 0.5" "128 0.1" "128 0.25"; do set -- $a
  timeout 90 build/bin/sddmm_probe --block $1 --cut --d $2 --iters 15 >> $P 2>&1; done
grep -E "probe:|cut" $P | cut -c1-110
timeout 400 build/bin/bsk bench train --patterns uniform --json $OUT/train.json > $OUT/train.txt 2>/tmp/train.err; echo "train rc=$?"
cat $OUT/train.txt
