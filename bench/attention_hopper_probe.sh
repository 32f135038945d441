#!/bin/bash
# attention_hopper_probe.sh — one device run for the Hopper attention kernel (src/cuda/hopper/attention_*):
# build (sm_90a only), the attention tests (CPU + GPU, the Hopper ones assert the Hopper kernel ran), the
# benchmark as an A/B of the kernel options (`bsk attention --compare`: the timed variant, then the mma.sync
# kernel, then variants 5 and 7 — the third and fourth Hopper runs read up to 10 % low at high density
# (power), so each variant is also timed first, twice, and the first-position figures are compared), SM clock
# and power sampled during the benchmark, compute-sanitizer memcheck on the short Hopper tests, optionally ncu
# on the dense D=128 config; a summary last. Logs and JSON in $OUT.
# Variants: 4 = the default, 5 / 7 / 8 = the A/B builds listed at the top of attention_hopper.cu (per head dim).
# Usage (device machine, repo root): bench/attention_hopper_probe.sh [extra bsk attention args...]
#   ATTN_BUILD=dir (default build-attnh); ATTN_SAN=0 skips memcheck; ATTN_BENCH=0 skips the benchmark;
#   ATTN_NCU=1 adds ncu (SpeedOfLight, WarpStateStats, ComputeWorkloadAnalysis, tensor pipe) on the dense
#   non-causal config of head dim ATTN_NCU_DIM (128), variants ATTN_NCU_VARIANTS (4 5 7); ATTN_REPS / ATTN_VARIANTS / ATTN_ITERS shape the benchmark loop; ATTN_ALT=1 reverses
#   the variant order on every other rep (clocks drift: each variant first and last once); ATTN_TESTS is the test
#   filter (default attn), ATTN_SAN_FILTER memcheck's (default gpu_attn_hopper_long); ATTN_CHECK128="args" adds one
#   `bsk attention --dims 128 --variant 4 --compare args` invocation after the loop (a D=128 check); ATTN_NCU=xu runs
#   only the short XU / tensor / issue metric pass; a variant written "8s" in ATTN_VARIANTS runs variant 8 with
#   BSK_ATTN_SKIPQ=1 set (a timing-only build, when attention_hopper.cu has one). ATTN_CHECK128_VARIANTS (default 4)
#   lists the variants timed first in the D=128 check (one invocation each). ATTN_TRACE_VARIANTS="4 5" runs, per
#   variant, one dense D=64 bf16 launch with BSK_ATTN_TRACE=1 (the slot-clock probe, when attention_hopper.cu has
#   it) and summarises the clocks.
set -o pipefail
B=${ATTN_BUILD:-build-attnh}
OUT=${OUT:-/tmp/attn_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' all > "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$CUOBJ" --dump-sass $B/src/cuda/hopper/attention_hopper.o > "$OUT/sass.txt" 2>/dev/null
res_sass=$(awk '/Function :/{f=$3; if (match(f,/ILi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+E/)) f=substr(f,RSTART,RLENGTH)} /HGMMA/{n[f]++} /LDL|STL/{s[f]++} /MUFU.EX2/{x[f]++} /FADD.RM/{r[f]++} /^ +\/\*[0-9a-f]+\*\//{i[f]++} END{for (k in n) printf "\n  %s HGMMA=%d LDL/STL=%d MUFU.EX2=%d FADD.RM=%d inst=%d; ", k, n[k], s[k], x[k], r[k], i[k]}' "$OUT/sass.txt")
res_sass="$res_sass C7520 in the build log: $(grep -c C7520 "$OUT/build.log")"
res_tests="not run"; res_mem="not run"; res_bench="not run"
timeout ${ATTN_TEST_TIMEOUT:-90} $B/bin/bsk_tests ${ATTN_TESTS:-attn} > "$OUT/tests.log" 2>&1
rc=$?
grep -v "^ok " "$OUT/tests.log" | head -40
res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
hung=0
if [ $rc = 124 ]; then echo "tests: TIMED OUT (hang?)"; hung=1; fi
echo "tests: $(( $(date +%s) - t0 )) s"
if [ "${ATTN_BENCH:-1}" = 1 ] && [ $hung = 0 ]; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
        --format=csv,noheader -lms 250 > "$OUT/clocks.csv" 2>/dev/null &
    smi=$!
    res_bench="rc"
    : > "$OUT/bench.log"
    nrep=0
    for rep in ${ATTN_REPS:-1 2}; do
        vs="${ATTN_VARIANTS:-4 5 7}"
        nrep=$((nrep + 1))
        [ "${ATTN_ALT:-0}" = 1 ] && [ $((nrep % 2)) = 0 ] && vs=$(echo $vs | tr ' ' '\n' | tac | tr '\n' ' ')
        for v in $vs; do
            echo "#### rep $rep variant $v first" >> "$OUT/bench.log"
            # a variant written "8s": variant 8 with BSK_ATTN_SKIPQ=1 (attention_hopper.cu: a timing-only build, if present)
            skip=; case $v in *s) skip=1;; esac
            BSK_ATTN_SKIPQ=$skip timeout ${ATTN_BENCH_TIMEOUT:-60} $B/bin/bsk attention --variant ${v%s} --compare --iters ${ATTN_ITERS:-10} \
                --json "$OUT/attention_hopper_v$v.json" "$@" >> "$OUT/bench.log" 2>&1
            res_bench="$res_bench $?"
        done
    done
    if [ -n "${ATTN_CHECK128:-}" ]; then
        for v in ${ATTN_CHECK128_VARIANTS:-4}; do
            echo "#### rep 128 variant $v first" >> "$OUT/bench.log"
            timeout ${ATTN_BENCH_TIMEOUT:-60} $B/bin/bsk attention --variant $v --compare --iters ${ATTN_ITERS:-10} --dims 128 \
                --json "$OUT/attention_hopper_d128_v$v.json" $ATTN_CHECK128 >> "$OUT/bench.log" 2>&1
            res_bench="$res_bench $?"
        done
    fi
    kill $smi 2>/dev/null
    echo "bench: $(( $(date +%s) - t0 )) s"
fi
for v in ${ATTN_TRACE_VARIANTS:-}; do
    [ $hung = 0 ] || break
    BSK_ATTN_TRACE=1 timeout 60 $B/bin/bsk attention --variant $v --dims 64 --densities 1.0 --iters 1 --warmup 1 \
        --json /tmp/trace_$v.json > "$OUT/trace_v$v.log" 2>&1
done
if [ "${ATTN_SAN:-1}" != 0 ] && [ $hung = 0 ]; then
    timeout ${ATTN_SAN_TIMEOUT:-50} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests \
        ${ATTN_SAN_FILTER:-gpu_attn_hopper_long} > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -c '^ok ' "$OUT/memcheck.log") ok"
    echo "sanitizer: $(( $(date +%s) - t0 )) s"
fi
if [ "${ATTN_NCU:-0}" != 0 ] && [ $hung = 0 ]; then
    [ "${ATTN_NCU}" = xu ] || for v in ${ATTN_NCU_VARIANTS:-4 5 7}; do
        timeout 60 ncu --clock-control none -k regex:attn_hopper --launch-count 1 --section SpeedOfLight --section WarpStateStats \
            --section ComputeWorkloadAnalysis \
            --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,sm__cycles_elapsed.avg.per_second \
            $B/bin/bsk attention --variant $v --dims ${ATTN_NCU_DIM:-128} --densities 1.0 --iters 1 --warmup 0 --json /tmp/ncu_$v.json \
            > "$OUT/ncu_v$v.log" 2>&1
    done
    # the MUFU (XU) pipe share, a separate call (a metric name ncu does not know fails only this one)
    for v in ${ATTN_NCU_VARIANTS:-4 5 7}; do
        timeout 45 ncu --clock-control none -k regex:attn_hopper --launch-count 1 \
            --metrics sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
            $B/bin/bsk attention --variant $v --dims ${ATTN_NCU_DIM:-128} --densities 1.0 --iters 1 --warmup 0 --json /tmp/ncu_$v.json \
            > "$OUT/ncu_xu_v$v.log" 2>&1
    done
    echo "ncu: $(( $(date +%s) - t0 )) s"
fi
echo "================ summary"
echo "sass:     $res_sass"
echo "tests:    $res_tests"
echo "memcheck: $res_mem"
echo "bench:    $res_bench"
if [ -s "$OUT/clocks.csv" ]; then
    awk -F', ' '{c+=$2; p+=$3; n++; if (min==""||$2<min) min=$2} END{if (n) printf "clocks:   SM mean %.0f MHz (min %d), power mean %.0f W over %d samples\n", c/n, min, p/n, n}' "$OUT/clocks.csv"
fi
# the timed (first) variant of each invocation, per config: "v<variant>:<TFLOPS>" per rep
echo "-- first-position TFLOPS per config (variant:TFLOPS, both reps); then the --compare figures of the last rep"
awk '/^#### rep/{v=$5} /^D=/{match($0,/^D= *[0-9]+ +[a-z-]+ +d=[0-9.]+/); k=substr($0,RSTART,RLENGTH); match($0,/ms +[0-9.]+ TFLOPS/); t=substr($0,RSTART,RLENGTH); gsub(/ms +| TFLOPS/,"",t); a[k]=a[k]" v"v":"t; if(!(k in o)){o[k]=++n; key[n]=k}} END{for(i=1;i<=n;i++) printf "%-28s%s\n", key[i], a[key[i]]}' "$OUT/bench.log"
grep -E "^D=|^####" "$OUT/bench.log" | tail -17 | sed -E 's/ +err [^[]*gate [^[]*\[hopper-attn-wgmma\]//; s/ \(actual [^)]*\)//' | cut -c1-170
# slot clocks (trc t WG1 turn gemm soft pack WG2 turn gemm soft pack): means over slots 8..55 of the period (WG1
# turn to turn), each warpgroup's GEMM wait (turn -> GEMMs done), softmax, pack + rest (pack -> next turn), and
# WG2's turn and GEMM-done times after WG1's in the same slot
for v in ${ATTN_TRACE_VARIANTS:-}; do
    echo "-- trace variant $v (cycles; WG1 slots 10-12 raw, then means over slots 8..55)"
    grep '^trc' "$OUT/trace_v$v.log" | awk '$2>=10 && $2<=12'
    grep '^trc' "$OUT/trace_v$v.log" | awk '{t=$2; a[t]=$4; b[t]=$5; c[t]=$6; d[t]=$7; e[t]=$9; f[t]=$10; g[t]=$11; h[t]=$12}
        END{n=0; for (t=8; t<56; t++) {n++; P+=a[t+1]-a[t]; G1+=b[t]-a[t]; S1+=c[t]-b[t]; K1+=d[t]-c[t]; W1+=a[t+1]-d[t];
            G2+=f[t]-e[t]; S2+=g[t]-f[t]; K2+=h[t]-g[t]; W2+=e[t+1]-h[t]; O+=e[t]-a[t]; OG+=f[t]-b[t]}
            if (n) printf "period %.0f | WG1 gemm %.0f soft %.0f pack %.0f to-turn %.0f | WG2 gemm %.0f soft %.0f pack %.0f to-turn %.0f | WG2-WG1 turn %.0f gemm-done %.0f\n",
            P/n, G1/n, S1/n, K1/n, W1/n, G2/n, S2/n, K2/n, W2/n, O/n, OG/n}'
    # EW points (after "|": issued, V released, K_{t+1} waited, V_t waited) and the producer (trp: before the K
    # stage wait, K issued, V stage free, V issued): WG1's early waits, the producer's stalls, and K_{t+1}'s issue
    # relative to WG1's wait for it (negative: the consumer waits before the load is issued)
    cat "$OUT/trace_v$v.log" | awk '$1=="trc" && $13=="|" {t=$2; a[t]=$4; b[t]=$5; p4[t]=$14; p5[t]=$15; p6[t]=$16; p7[t]=$17}
        $1=="trp" {j=$2; pa[j]=$3; pb[j]=$4; pc[j]=$5; pd[j]=$6}
        END{n=0; for (t=8; t<56; t++) {n++; I+=p4[t]-a[t]; R+=p5[t]-p4[t]; K+=p6[t]-p5[t]; V+=p7[t]-p6[t]; G+=b[t]-p7[t];
            KE+=pb[t]-pa[t]; VE+=pc[t]-pb[t]; VI+=pd[t]-pc[t]; SL+=p5[t]-pb[t+1]; SV+=p6[t]-pd[t]}
            if (n) printf "WG1 issue %.0f Vrel %.0f Kwait %.0f Vwait %.0f then S %.0f | producer kempty-wait %.0f vempty-wait %.0f V-issue %.0f | K_{t+1} issued before WG1 waits %.0f, V_t %.0f\n",
            I/n, R/n, K/n, V/n, G/n, KE/n, VE/n, VI/n, SL/n, SV/n}'
done
for v in ${ATTN_NCU_VARIANTS:-4 5 7}; do
    [ -s "$OUT/ncu_v$v.log" ] && { echo "-- ncu variant $v"; grep -E "hmma|issue_active|lts__t_sectors|per_second|Duration|Warp Cycles Per Issued|Avg. Active Threads|Issue Slots Busy|SM Busy" "$OUT/ncu_v$v.log" | head -12;
        grep -E "pipe_xu|hmma|issue_active|inst_executed.sum|ERR" "$OUT/ncu_xu_v$v.log" | head -5; }
done
