#!/bin/bash
# one-off (session 18, deleted after): SDDMM column groups (auto rule) — tests, probes, train bench b64
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
G='-gencode arch=compute_90a,code=sm_90a'
make JOBS=16 GENCODE_PORTABLE="$G" all probes > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
build/bin/bsk_tests gpu_hopper_sddmm > $OUT/tests_sddmm.log 2>&1; echo "tests sddmm rc=$? $(tail -1 $OUT/tests_sddmm.log)"
build/bin/bsk_tests gpu_ > /tmp/tg.log 2>&1; echo "tests gpu_ rc=$? $(tail -1 /tmp/tg.log)"; grep -E "^FAIL" /tmp/tg.log | head
P=$OUT/sddmm_probe.txt
for a in "64 0.375" "64 0.75" "64 0.5" "128 0.5" "128 0.25" "128 0.1"; do set -- $a
  timeout 90 build/bin/sddmm_probe --block $1 --groups --d $2 --iters 12 >> $P 2>&1; done
timeout 60 build/bin/sddmm_probe --block 64 --d 0.1 --iters 12 >> $P 2>&1
grep -E "probe:|col_groups|order" $P | awk '{print}' | cut -c1-110
timeout 300 build/bin/bsk bench train --blocks 64 --patterns uniform --json $OUT/train_b64.json > $OUT/train_b64.txt 2>/tmp/train.err; echo "train rc=$?"
cat $OUT/train_b64.txt
