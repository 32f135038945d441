#!/bin/bash
# one-off (session 18, deleted after): final tests at HEAD, memcheck, GPU pytest; ncu L2 readings for the bytes-per-flop ceilings
export OUT=${OUT:-/tmp/o}; mkdir -p $OUT
BSK_COMMIT=$1 bench/run_gpu.sh tests py 2>&1 | tail -8
for t in gpu_hopper_sddmm_malformed_indices_safe gpu_hopper_sddmm_col_groups gpu_hopper_spmm_pattern_cache gpu_hopper_attention; do
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests $t > /tmp/mc.log 2>&1
  echo "memcheck $t: rc=$? $(grep -E 'ERROR SUMMARY' /tmp/mc.log | tail -1) $(tail -1 /tmp/mc.log)" | tee -a $OUT/san.txt; done
M=gpu__time_duration.sum,lts__t_bytes.sum.per_second,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,dram__bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct
K='regex:spmm_kernel|sddmm_kernel|nvjet|sm90_xmma|gemm'
for op in "spmm --blocks 32,64,128" "sddmm --blocks 64,128"; do
  timeout 200 ncu --clock-control none --csv --metrics $M -k "$K" --launch-count 40 build/bin/bsk bench $op --sizes 8192x8192x8192 --densities 0.1,0.5 --patterns uniform --iters 1 --warmup 0 > /tmp/ncu_$(echo $op | cut -d' ' -f1).csv 2>/tmp/ncu.err || tail -3 /tmp/ncu.err
done
python3 - <<'PY' | tee $OUT/ncu_l2.txt
import csv, glob, collections
for f in sorted(glob.glob('/tmp/ncu_*.csv')):
    rows = [r for r in csv.reader(l for l in open(f) if l.startswith('"'))]
    if not rows: print(f, 'empty'); continue
    h = rows[0]; iK = h.index('Kernel Name'); iM = h.index('Metric Name'); iV = h.index('Metric Value'); iI = h.index('ID')
    d = collections.OrderedDict()
    for r in rows[1:]:
        d.setdefault((r[iI], r[iK][:60]), {})[r[iM]] = r[iV]
    print('#', f)
    for (i, k), m in d.items():
        print(i, k, ' | '.join('%s=%s' % (n.split('.')[0].replace('__', ':')[-28:], v) for n, v in m.items()))
PY
