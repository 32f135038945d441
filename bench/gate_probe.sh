#!/bin/bash
# gate_probe.sh — one device run for the top-k block gate (src/cuda/attention/topk.cu, issue 7): build (sm_90a
# only), the gate tests (`bsk_tests topk`), a probe timing the gate's kernel choices at B=4 H=16 S=8192 D=128
# and D=64 bf16, block 128 (L2 flushed before every call, CUDA events, median) with a read-bandwidth floor
# measured in the same run, an Nsight Compute pass over the pooled-input selects (the session-7 one-pass select and
# the session-6 warp select: duration, occupancy, warp stall reasons, per-instruction samples in $OUT/ncu_source*.csv),
# compute-sanitizer memcheck on the GPU gate tests, `bsk attention` (gate share of the attention); a summary
# last. Logs in $OUT.
# Usage (device machine, repo root): bench/gate_probe.sh
#   GATE_BUILD=dir (default build-gate); GATE_TESTS=0, GATE_NCU=0, GATE_BENCH=0, GATE_SAN=0 skip those steps;
#   GATE_BENCH_ARGS (default: --dims 128,64 --densities 0.10,0.25,0.50 --iters 5); GATE_SAN_FILTER (the tests
#   memcheck runs, default gpu_attn_topk).
set -o pipefail
B=${GATE_BUILD:-build-gate}
OUT=${OUT:-/tmp/gate_out}
SCR=${GATE_SCRATCH:-/tmp/gate_scratch} # bulky or secondary outputs (ncu report, JSON): the device returns few files
mkdir -p "$OUT" "$SCR"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/bin/bsk_tests $B/bin/bsk \
    $B/lib/libbsk.a > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }

# ---- the probe (C, linked against the static library; bsk__topk_variant is topk.cu's benchmark hook): a launch
#      floor (4 KB memset), the unpooled gate, then the gate on pre-pooled input (params.pooled = 1: scores + top-k +
#      layout only), the session-7 one-pass select against the session-6 default alternately, cold and warm L2
cat > /tmp/gate_probe.c <<'EOF'
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bsk.h"
extern int bsk__topk_variant;
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv)
{
    int ncu = argc > 1 && !strcmp(argv[1], "--ncu"), iters = ncu ? 1 : 30;
    const int64_t Bt = 4, H = 16, S = 8192, D = 128, n = Bt * S * H * D;
    const int32_t bs = 128;
    size_t bytes = (size_t)n * 2, flush_bytes = (size_t)256 << 20;
    uint16_t *h = (uint16_t *)malloc(bytes);
    void *dq, *dk, *flush, *dst, *dpq, *dpk;
    CK(cudaMalloc(&dq, bytes)); CK(cudaMalloc(&dk, bytes)); CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMalloc(&dst, bytes));
    const int64_t nblk = S / bs;
    const size_t pbytes = (size_t)(Bt * nblk * H * D) * 2; /* pre-pooled Q and K: one bf16 row per 128-row block */
    CK(cudaMalloc(&dpq, pbytes)); CK(cudaMalloc(&dpk, pbytes));
    uint64_t x = 88172645463325252ull;
    for (int t = 0; t < 2; t++) {
        for (int64_t i = 0; i < n; i++) { /* bf16 of a uniform value in [-1, 1), never zero */
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            if (f == 0.0f) f = 0.5f;
            uint32_t u; memcpy(&u, &f, 4); h[i] = (uint16_t)(u >> 16);
        }
        CK(cudaMemcpy(t ? dk : dq, h, bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(t ? dpk : dpq, h + (size_t)t * 4096, pbytes, cudaMemcpyHostToDevice)); /* random rows */
    }
    bsk_context *ctx;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA)) { printf("no device\n"); return 1; }
    void *sv = NULL;
    bsk_get_stream(ctx, &sv);
    cudaStream_t s = (cudaStream_t)sv;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    double *ms = (double *)malloc(sizeof(double) * (size_t)iters);
    /* floor: a device-to-device copy of Q (bytes read + bytes written), L2 flushed */
    if (!ncu) {
        for (int i = 0; i < iters; i++) {
            CK(cudaMemsetAsync(flush, i, flush_bytes, s)); CK(cudaEventRecord(e0, s));
            CK(cudaMemcpyAsync(dst, dq, bytes, cudaMemcpyDeviceToDevice, s));
            CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
            float f; CK(cudaEventElapsedTime(&f, e0, e1)); ms[i] = f;
        }
        qsort(ms, (size_t)iters, sizeof *ms, cmp);
        double bw = 2.0 * (double)bytes / (ms[iters / 2] * 1e-3) * 1e-12;
        printf("floor: d2d copy %.1f MB: %.3f ms = %.2f TB/s (read+write); reading Q and K (%.1f MB) at that rate: %.1f us\n",
               bytes / 1e6, ms[iters / 2], bw, 2.0 * bytes / 1e6, 2.0 * bytes / (bw * 1e12) * 1e6);
    }
    /* launch floor: a 4 KB memset timed the same way (L2 flushed, events around it): what any one-launch gate pays */
    if (!ncu) {
        for (int i = 0; i < iters; i++) {
            CK(cudaMemsetAsync(flush, i, flush_bytes, s)); CK(cudaEventRecord(e0, s));
            CK(cudaMemsetAsync(dst, i, 4096, s));
            CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
            float f; CK(cudaEventElapsedTime(&f, e0, e1)); ms[i] = f;
        }
        qsort(ms, (size_t)iters, sizeof *ms, cmp);
        printf("floor: 4 KB memset after the flush (launch + event overhead): median %.1f us (min %.1f)\n", ms[iters / 2] * 1e3,
               ms[0] * 1e3);
    }
    /* entry 0: the unpooled gate (unchanged, a reference); entries 1..: pre-pooled input (params.pooled = 1),
       compared with entry 1. Session 7: variant 0 = the one-pass pooled select (default), 128 = the previous
       default (direct-read warp select), timed alternately; warm = no L2 flush before the call. --ncu: entries 1 and
       2 at D=128 non-causal only (one profiled launch each). */
    const int variants[] = {0, 0, 128, 0, 128, 4, 8, 0, 128};
    const int pooled_in[] = {0, 1, 1, 1, 1, 1, 1, 1, 1};
    const int warm[] = {0, 0, 0, 0, 0, 0, 0, 1, 1};
    const char *names[] = {"unpooled: fast pool + warp select + PDL", "POOLED: one-pass pooled select (s7)",
                           "POOLED: direct-read warp select (s6 dflt)", "POOLED: one-pass pooled select, again",
                           "POOLED: s6 warp select, again", "POOLED: one-pass, no PDL",
                           "POOLED: rows to fp64 workspace + tiled", "POOLED: one-pass, L2 warm (no flush)",
                           "POOLED: s6 warp select, L2 warm"};
    int nvar = 9;
    for (int dd = 0; dd < (ncu ? 1 : 2); dd++)
    for (int causal = 0; causal < (ncu ? 1 : 2); causal++) {
        const int64_t Dd = dd ? 64 : D; /* D=64: the same buffers viewed with half the head dim */
        int32_t *ref = NULL;
        for (int vi = 0; vi < nvar; vi++) {
            if (ncu && vi != 1 && vi != 2) continue;
            bsk_topk_params p;
            memset(&p, 0, sizeof p);
            p.q = bsk_attn_tensor_bshd(dq, Bt, S, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
            p.k = bsk_attn_tensor_bshd(dk, Bt, S, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
            if (pooled_in[vi]) {
                if (vi > 0 && !pooled_in[vi - 1]) { free(ref); ref = NULL; } /* pooled entries: their own reference */
                p.pooled = 1;
                p.q = bsk_attn_tensor_bshd(dpq, Bt, nblk, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
                p.k = bsk_attn_tensor_bshd(dpk, Bt, nblk, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
            }
            p.top_k = 6; p.causal = causal; p.keep_first = 1; p.keep_diagonal = 1; /* as bsk attention at d 0.1 */
            bsk_attn_layout L;
            if (bsk_attn_layout_alloc(S, S, bs, bs, (int32_t)Bt, (int32_t)H, p.top_k, BSK_MEM_DEVICE, &L)) { printf("alloc\n"); return 1; }
            bsk__topk_variant = variants[vi];
            bsk_status st = ncu ? BSK_SUCCESS : bsk_topk_block_layout(ctx, &p, &L); /* warm-up */
            for (int i = 0; i < iters && !st; i++) {
                if (!warm[vi]) CK(cudaMemsetAsync(flush, i, flush_bytes, s));
                CK(cudaEventRecord(e0, s));
                st = bsk_topk_block_layout(ctx, &p, &L);
                CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
                float f; CK(cudaEventElapsedTime(&f, e0, e1)); ms[i] = f;
            }
            bsk__topk_variant = 0;
            CK(cudaStreamSynchronize(s));
            int64_t rows = Bt * H * (S / bs), nint = rows * (2 + 2 * (int64_t)p.top_k), diff = 0;
            int32_t *got = (int32_t *)malloc((size_t)nint * 4);
            CK(cudaMemcpy(got, L.full_count, (size_t)rows * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + rows, L.part_count, (size_t)rows * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + 2 * rows, L.full_idx, (size_t)rows * p.top_k * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + 2 * rows + rows * p.top_k, L.part_idx, (size_t)rows * p.top_k * 4, cudaMemcpyDeviceToHost));
            int64_t kept = 0;
            for (int64_t r = 0; r < rows; r++) kept += got[r] + got[rows + r];
            if (!ref) ref = got;
            else {
                for (int64_t r = 0; r < rows; r++) {
                    diff += got[r] != ref[r] || got[rows + r] != ref[rows + r];
                    for (int a = 0; a < got[r]; a++) diff += got[2 * rows + r * p.top_k + a] != ref[2 * rows + r * p.top_k + a];
                    for (int a = 0; a < got[rows + r]; a++)
                        diff += got[2 * rows + rows * p.top_k + r * p.top_k + a] != ref[2 * rows + rows * p.top_k + r * p.top_k + a];
                }
                free(got);
            }
            qsort(ms, (size_t)iters, sizeof *ms, cmp);
            printf("gate D=%3lld %-8s variant %d %-42s %s: median %.1f us (min %.1f)  kept %lld  diff vs first: %lld\n",
                   (long long)Dd, causal ? "causal" : "non-caus", variants[vi], names[vi], st ? bsk_status_string(st) : "ok",
                   ms[iters / 2] * 1e3, ms[0] * 1e3, (long long)kept, (long long)diff);
            bsk_attn_layout_free(&L);
        }
        free(ref);
    }
    bsk_destroy(ctx);
    return 0;
}
EOF
cc -std=c11 -O2 -Wall -Iinclude -I"$CUDA_HOME/include" /tmp/gate_probe.c -o $B/bin/gate_probe $B/lib/libbsk.a \
    -L"$CUDA_HOME/lib64" -lcudart_static -ldl -lrt -lpthread -lm -lstdc++ >> "$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "PROBE BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
res_tests="not run"; res_mem="not run"; res_bench="not run"; res_ncu="not run"; hung=0
if [ "${GATE_TESTS:-1}" = 1 ]; then
    timeout ${GATE_TEST_TIMEOUT:-90} $B/bin/bsk_tests topk > "$OUT/tests.log" 2>&1
    rc=$?
    grep -v "^ok " "$OUT/tests.log" | head -30
    res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
    if [ $rc = 124 ]; then echo "tests: TIMED OUT (hang?)"; hung=1; fi
    echo "tests: $(( $(date +%s) - t0 )) s"
fi
[ $hung = 0 ] && timeout 60 $B/bin/gate_probe > "$OUT/probe.log" 2>&1
res_probe="rc=$?"
echo "probe: $(( $(date +%s) - t0 )) s"
if [ "${GATE_NCU:-1}" = 1 ] && [ $hung = 0 ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -n "$NCU" ]; then
        timeout ${GATE_NCU_TIMEOUT:-90} "$NCU" --clock-control none --cache-control all \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            --section SourceCounters --section MemoryWorkloadAnalysis \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__occupancy_limit_registers \
            -k regex:'select' -f -o "$SCR/select" $B/bin/gate_probe --ncu > "$SCR/ncu_run.log" 2>&1
        res_ncu="rc=$?"
        "$NCU" -i "$SCR/select.ncu-rep" --page details > "$OUT/ncu.log" 2>&1
        "$NCU" -i "$SCR/select.ncu-rep" --page raw --csv > "$OUT/ncu_raw.csv" 2>&1
        for k in ${GATE_NCU_SOURCE:-select_pooled select_warp}; do # per-instruction samples of the first launch of each kernel named
            for skip in 0; do
                "$NCU" -i "$SCR/select.ncu-rep" --page source --csv --print-source sass -k regex:$k --launch-skip $skip \
                    --launch-count 1 > "$OUT/ncu_source_${k}_$skip.csv" 2>&1
            done
        done
    fi
    echo "ncu: $(( $(date +%s) - t0 )) s"
fi
if [ "${GATE_BENCH:-1}" = 1 ] && [ $hung = 0 ]; then
    timeout ${GATE_BENCH_TIMEOUT:-120} $B/bin/bsk attention ${GATE_BENCH_ARGS:---dims 128,64 --densities 0.10,0.25,0.50 --iters 5} \
        --json "$SCR/attention_gate.json" > "$OUT/bench.log" 2>&1
    res_bench="rc=$?"
    echo "bench: $(( $(date +%s) - t0 )) s"
fi
if [ "${GATE_SAN:-1}" = 1 ] && [ $hung = 0 ]; then
    timeout ${GATE_SAN_TIMEOUT:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests ${GATE_SAN_FILTER:-gpu_attn_topk} \
        > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -c '^ok ' "$OUT/memcheck.log") ok"
    echo "sanitizer: $(( $(date +%s) - t0 )) s"
fi
echo "================ summary"
echo "tests:    $res_tests"
echo "memcheck: $res_mem"
echo "probe:    $res_probe   ncu: $res_ncu   bench: $res_bench"
grep -v "^$" "$OUT/probe.log" | cut -c1-200
# ncu: one line per select launch (name, grid, duration, DRAM bytes read, occupancy), then the stall reasons
awk '/^  .*\) \([0-9, ]*\)x\(.*Context/{n=$0; sub(/^ *(void )?(<unnamed>::)?/,"",n); sub(/\(.*/,"",n);
        g=$0; sub(/.*\) \(/,"(",g); sub(/, Context.*/,"",g); gsub(/ /,"",g); printf "\n%-24s %-18s", n, g}
     /gpu__time_duration.sum/{printf " %s %s", $NF, $(NF-1)}
     /dram__bytes_read.sum/{printf " | read %s %s", $NF, $(NF-1)}
     /dram__throughput.avg.pct/{printf " | dram %s%%", $NF}
     /launch__registers_per_thread/{printf " | regs %s", $NF}
     /sm__warps_active/{printf " | occ %s%%", $NF}' "$OUT/ncu.log" 2>/dev/null; echo
grep "gate" "$OUT/bench.log" 2>/dev/null | cut -c1-160
grep -E "^  [a-z_]+.*select.*\(|Warp Cycles Per Issued|Achieved Occupancy|Duration  |Registers Per Thread|No Eligible|Issued Warp Per Scheduler" "$OUT/ncu.log" 2>/dev/null | sed 's/  */ /g' | cut -c1-150
