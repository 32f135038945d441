#!/bin/bash
# one-off (session 18, deleted after): SDDMM persistent grid size sweep at low density
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
make JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' probes > /tmp/build.log 2>&1 || { tail -20 /tmp/build.log; exit 1; }
P=$OUT/sddmm_ctas.txt
for a in "128 0.1" "64 0.1" "128 0.25" "64 0.25"; do set -- $a
  timeout 100 build/bin/sddmm_probe --block $1 --ctas --d $2 --iters 15 >> $P 2>&1; done
grep -E "probe:|max_ctas" $P | sed 's/ err .*//'
