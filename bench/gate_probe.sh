#!/bin/bash
# gate_probe.sh — one device run for the top-k block gate (src/cuda/attention/topk.cu, issue 7): build (sm_90a
# only), the gate tests (`bsk_tests topk`), a probe timing the gate on pre-pooled input (params.pooled = 1) at
# B=4 H=16 S=8192 D=128 and D=64 bf16, block 128, top_k 6, first + diagonal kept (L2 flushed before every call, CUDA
# events, median of 30) — the new build against a base build in alternated processes (base, new, new, base), every
# layout compared with the base's — then `bsk attention` (gate share of the attention), compute-sanitizer memcheck on
# the GPU gate tests, an Nsight Compute pass over the pooled selects (new variants 0 and 512, the base's default);
# a summary last. Logs in $OUT.
# Usage (device machine, repo root): bench/gate_probe.sh
#   GATE_BASE_SRC=file: the base build is this tree with src/cuda/attention/topk.cu replaced by that file (e.g. the
#   previous session's topk.cu); unset: no base build, the new build's variants only. GATE_MID_SRC=file: a second
#   such build ("mid", e.g. an intermediate step), timed like the base (order base, mid, new, new, mid, base).
#   GATE_VARIANTS (default 0,512,4,1024: bsk__topk_variant values the new build times; the base build times 0);
#   GATE_BUILD=dir (default build-gate); GATE_TESTS=0, GATE_NCU=0, GATE_BENCH=0, GATE_SAN=0 skip those steps;
#   GATE_BENCH_ARGS (default: --dims 128,64 --densities 0.10,0.25,0.50 --iters 5); GATE_SAN_FILTER (the tests
#   memcheck runs, default gpu_attn_topk).
set -o pipefail
B=${GATE_BUILD:-build-gate}
OUT=${OUT:-/tmp/gate_out}
SCR=${GATE_SCRATCH:-/tmp/gate_scratch} # bulky or secondary outputs (ncu report, JSON): the device returns few files
VARS=${GATE_VARIANTS:-0,512,4,1024}
mkdir -p "$OUT" "$SCR"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
t0=$(date +%s)
make BUILD=$B JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/bin/bsk_tests $B/bin/bsk \
    $B/lib/libbsk.a > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
other_build() { # $1 name, $2 topk.cu: a copy of this tree and its build, topk.cu replaced (only it recompiles)
    local dir=/tmp/gate_$1
    rm -rf $dir && mkdir -p $dir && cp -a . $dir/ && cp "$2" $dir/src/cuda/attention/topk.cu && touch $dir/src/cuda/attention/topk.cu
    (cd $dir && make BUILD=$B JOBS=8 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' $B/lib/libbsk.a \
        > "$SCR/build_$1.log" 2>&1; echo $? > "$SCR/build_$1.rc")
}
BASE=""; MID=""
if [ -n "$GATE_BASE_SRC" ]; then BASE=/tmp/gate_base; other_build base "$GATE_BASE_SRC" & base_pid=$!; fi
if [ -n "$GATE_MID_SRC" ]; then MID=/tmp/gate_mid; other_build mid "$GATE_MID_SRC" & mid_pid=$!; fi

# ---- the probe (C, linked against the static library; bsk__topk_variant is topk.cu's benchmark hook): a launch
#      floor (4 KB memset timed the same way), then the pooled gate for each variant given, D=128 / 64, non-causal /
#      causal; --dump FILE writes the first variant's layouts, --ref FILE compares every layout with such a file
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
    int ncu = 0, variants[16], nvar = 0;
    const char *label = "new", *dump = NULL, *refp = NULL, *vs = "0";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ncu")) ncu = 1;
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
        else if (!strcmp(argv[i], "--ref") && i + 1 < argc) refp = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) vs = argv[++i];
    }
    for (const char *c = vs; *c && nvar < 16;) { variants[nvar++] = atoi(c); c = strchr(c, ','); if (!c) break; c++; }
    const int iters = ncu ? 1 : 30;
    const int64_t Bt = 4, H = 16, S = 8192, D = 128;
    const int32_t bs = 128;
    const int64_t nblk = S / bs, n = Bt * nblk * H * D; /* pre-pooled Q and K: one bf16 row per 128-row block */
    size_t bytes = (size_t)n * 2, flush_bytes = (size_t)256 << 20;
    uint16_t *h = (uint16_t *)malloc(bytes);
    void *dpq, *dpk, *flush, *dst;
    CK(cudaMalloc(&dpq, bytes)); CK(cudaMalloc(&dpk, bytes)); CK(cudaMalloc(&flush, flush_bytes)); CK(cudaMalloc(&dst, 4096));
    uint64_t x = 88172645463325252ull;
    for (int t = 0; t < 2; t++) {
        for (int64_t i = 0; i < n; i++) { /* bf16 of a uniform value in [-1, 1), never zero */
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            float f = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
            if (f == 0.0f) f = 0.5f;
            uint32_t u; memcpy(&u, &f, 4); h[i] = (uint16_t)(u >> 16);
        }
        CK(cudaMemcpy(t ? dpk : dpq, h, bytes, cudaMemcpyHostToDevice));
    }
    bsk_context *ctx;
    if (bsk_create(&ctx, BSK_BACKEND_CUDA)) { printf("no device\n"); return 1; }
    void *sv = NULL;
    bsk_get_stream(ctx, &sv);
    cudaStream_t s = (cudaStream_t)sv;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    double ms[64];
    if (!ncu) { /* launch floor: a 4 KB memset timed the same way (L2 flushed, events around it) */
        for (int i = 0; i < iters; i++) {
            CK(cudaMemsetAsync(flush, i, flush_bytes, s)); CK(cudaEventRecord(e0, s));
            CK(cudaMemsetAsync(dst, i, 4096, s));
            CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
            float f; CK(cudaEventElapsedTime(&f, e0, e1)); ms[i] = f;
        }
        qsort(ms, (size_t)iters, sizeof *ms, cmp);
        printf("[%s] floor: 4 KB memset after the flush (launch + events): median %.1f us\n", label, ms[iters / 2] * 1e3);
    }
    const int top_k = 6;
    const int64_t rows = Bt * H * nblk, nint = rows * (2 + 2 * (int64_t)top_k);
    FILE *fd = dump ? fopen(dump, "wb") : NULL, *fr = refp ? fopen(refp, "rb") : NULL;
    int32_t *got = (int32_t *)malloc((size_t)nint * 4), *ref = (int32_t *)malloc((size_t)nint * 4), *first = NULL;
    for (int dd = 0; dd < (ncu ? 1 : 2); dd++)
    for (int causal = 0; causal < 2; causal++) {
        const int64_t Dd = dd ? 64 : D; /* D=64: the same buffers viewed with half the head dim */
        int have_ref = fr && fread(ref, 4, (size_t)nint, fr) == (size_t)nint;
        for (int vi = 0; vi < nvar; vi++) {
            bsk_topk_params p;
            memset(&p, 0, sizeof p);
            p.pooled = 1;
            p.q = bsk_attn_tensor_bshd(dpq, Bt, nblk, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
            p.k = bsk_attn_tensor_bshd(dpk, Bt, nblk, H, Dd, BSK_BF16, BSK_MEM_DEVICE);
            p.top_k = top_k; p.causal = causal; p.keep_first = 1; p.keep_diagonal = 1; /* as bsk attention at d 0.1 */
            bsk_attn_layout L;
            if (bsk_attn_layout_alloc(S, S, bs, bs, (int32_t)Bt, (int32_t)H, p.top_k, BSK_MEM_DEVICE, &L)) { printf("alloc\n"); return 1; }
            bsk__topk_variant = variants[vi];
            bsk_status st = ncu ? BSK_SUCCESS : bsk_topk_block_layout(ctx, &p, &L); /* warm-up */
            for (int i = 0; i < iters && !st; i++) {
                CK(cudaMemsetAsync(flush, i, flush_bytes, s));
                CK(cudaEventRecord(e0, s));
                st = bsk_topk_block_layout(ctx, &p, &L);
                CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
                float f; CK(cudaEventElapsedTime(&f, e0, e1)); ms[i] = f;
            }
            bsk__topk_variant = 0;
            CK(cudaStreamSynchronize(s));
            CK(cudaMemcpy(got, L.full_count, (size_t)rows * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + rows, L.part_count, (size_t)rows * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + 2 * rows, L.full_idx, (size_t)rows * top_k * 4, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(got + 2 * rows + rows * top_k, L.part_idx, (size_t)rows * top_k * 4, cudaMemcpyDeviceToHost));
            int64_t kept = 0, dref = -1, dfirst = 0;
            for (int64_t r = 0; r < rows; r++) kept += got[r] + got[rows + r];
            /* unused list entries are not part of the result: compare counts and the entries they cover */
            #define LDIFF(A, Bv, out) do { out = 0; for (int64_t r = 0; r < rows; r++) { \
                if (A[r] != Bv[r] || A[rows + r] != Bv[rows + r]) { out++; continue; } \
                for (int a = 0; a < A[r]; a++) out += A[2 * rows + r * top_k + a] != Bv[2 * rows + r * top_k + a]; \
                for (int a = 0; a < A[rows + r]; a++) out += A[2 * rows + rows * top_k + r * top_k + a] != Bv[2 * rows + rows * top_k + r * top_k + a]; } } while (0)
            if (have_ref) LDIFF(got, ref, dref);
            if (!first) {
                first = (int32_t *)malloc((size_t)nint * 4);
                memcpy(first, got, (size_t)nint * 4);
                if (fd) fwrite(got, 4, (size_t)nint, fd);
            } else LDIFF(got, first, dfirst);
            qsort(ms, (size_t)iters, sizeof *ms, cmp);
            printf("[%s] gate D=%3lld %-8s variant %4d %s: median %.2f us (min %.2f)  kept %lld  diff vs this build's first: %lld"
                   "  vs base: %lld\n", label, (long long)Dd, causal ? "causal" : "non-caus", variants[vi],
                   st ? bsk_status_string(st) : "ok", ms[iters / 2] * 1e3, ms[0] * 1e3, (long long)kept, (long long)dfirst,
                   (long long)dref);
            bsk_attn_layout_free(&L);
        }
        free(first);
        first = NULL;
    }
    if (fd) fclose(fd);
    if (fr) fclose(fr);
    bsk_destroy(ctx);
    return 0;
}
EOF
probe_cc() { # $1 build tree, $2 output binary
    cc -std=c11 -O2 -Wall -Iinclude -I"$CUDA_HOME/include" /tmp/gate_probe.c -o "$2" "$1/$B/lib/libbsk.a" \
        -L"$CUDA_HOME/lib64" -lcudart_static -ldl -lrt -lpthread -lm -lstdc++ >> "$OUT/build.log" 2>&1
}
probe_cc . $B/bin/gate_probe || { tail -30 "$OUT/build.log"; echo "PROBE BUILD FAILED"; exit 1; }
res_tests="not run"; res_mem="not run"; res_bench="not run"; res_ncu="not run"; res_probe="not run"; hung=0
if [ "${GATE_TESTS:-1}" = 1 ]; then
    timeout ${GATE_TEST_TIMEOUT:-150} $B/bin/bsk_tests topk > "$OUT/tests.log" 2>&1
    rc=$?
    grep -v "^ok " "$OUT/tests.log" | head -30
    res_tests="rc=$rc $(tail -1 "$OUT/tests.log")"
    if [ $rc = 124 ]; then echo "tests: TIMED OUT (hang?)"; hung=1; fi
    echo "tests: $(( $(date +%s) - t0 )) s"
fi
if [ -n "$BASE" ]; then
    wait $base_pid
    if [ "$(cat $SCR/build_base.rc)" = 0 ] && probe_cc $BASE $B/bin/gate_probe_base; then echo "base build: ok"
    else tail -20 "$SCR/build_base.log"; echo "BASE BUILD FAILED"; BASE=""; fi
fi
if [ -n "$MID" ]; then
    wait $mid_pid
    if [ "$(cat $SCR/build_mid.rc)" = 0 ] && probe_cc $MID $B/bin/gate_probe_mid; then echo "mid build: ok"
    else tail -20 "$SCR/build_mid.log"; echo "MID BUILD FAILED"; MID=""; fi
fi
if [ $hung = 0 ]; then # alternated processes: base, new, new, base (new only: new twice)
    : > "$OUT/probe.log"; rm -f $SCR/ref.bin
    if [ -n "$BASE" ]; then
        timeout 60 $B/bin/gate_probe_base --label base --variants 0 --dump $SCR/ref.bin >> "$OUT/probe.log" 2>&1
        REF="--ref $SCR/ref.bin"
    else REF=""; fi
    [ -n "$MID" ] && timeout 60 $B/bin/gate_probe_mid --label mid --variants 0 $REF >> "$OUT/probe.log" 2>&1
    timeout 60 $B/bin/gate_probe --label new --variants $VARS $REF >> "$OUT/probe.log" 2>&1
    timeout 60 $B/bin/gate_probe --label new --variants $VARS $REF >> "$OUT/probe.log" 2>&1
    [ -n "$MID" ] && timeout 60 $B/bin/gate_probe_mid --label mid --variants 0 $REF >> "$OUT/probe.log" 2>&1
    [ -n "$BASE" ] && timeout 60 $B/bin/gate_probe_base --label base --variants 0 $REF >> "$OUT/probe.log" 2>&1
    res_probe="rc=$?"
    echo "probe: $(( $(date +%s) - t0 )) s"
fi
if [ "${GATE_BENCH:-1}" = 1 ] && [ $hung = 0 ]; then
    timeout ${GATE_BENCH_TIMEOUT:-120} $B/bin/bsk attention ${GATE_BENCH_ARGS:---dims 128,64 --densities 0.10,0.25,0.50 --iters 5} \
        --json "$SCR/attention_gate.json" > "$OUT/bench.log" 2>&1
    res_bench="rc=$?"
    echo "bench: $(( $(date +%s) - t0 )) s"
fi
if [ "${GATE_SAN:-1}" = 1 ] && [ $hung = 0 ]; then
    timeout ${GATE_SAN_TIMEOUT:-120} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/bsk_tests ${GATE_SAN_FILTER:-gpu_attn_topk} \
        > "$OUT/memcheck.log" 2>&1; rc=$?
    res_mem="rc=$rc $(grep 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1) $(grep -c '^ok ' "$OUT/memcheck.log") ok"
    echo "sanitizer: $(( $(date +%s) - t0 )) s"
fi
if [ "${GATE_NCU:-1}" = 1 ] && [ $hung = 0 ]; then
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
    if [ -n "$NCU" ]; then
        : > "$OUT/ncu.log"
        for who in new base; do
            bin=$B/bin/gate_probe; v=0,512
            if [ $who = base ]; then [ -n "$BASE" ] || continue; bin=$B/bin/gate_probe_base; v=0; fi
            timeout ${GATE_NCU_TIMEOUT:-60} "$NCU" --clock-control none --cache-control all \
                --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
                --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
                -k regex:'select' -f -o "$SCR/select_$who" $bin --ncu --label $who --variants $v > "$SCR/ncu_run_$who.log" 2>&1
            res_ncu="$res_ncu $who rc=$?"
            echo "### $who" >> "$OUT/ncu.log"
            "$NCU" -i "$SCR/select_$who.ncu-rep" --page details >> "$OUT/ncu.log" 2>&1
        done
    fi
    echo "ncu: $(( $(date +%s) - t0 )) s"
fi
echo "================ summary"
echo "tests:    $res_tests"
echo "memcheck: $res_mem"
echo "probe:    $res_probe   ncu: $res_ncu   bench: $res_bench"
grep -v "^$" "$OUT/probe.log" | cut -c1-220
# ncu: one line per select launch (name, grid, duration, active / elapsed SM cycles, instructions, occupancy)
awk '/^### /{print; next}
     /^  .*\) \([0-9, ]*\)x\(.*Context/{n=$0; sub(/^ *(void )?(<unnamed>::)?/,"",n); sub(/\(.*/,"",n);
        g=$0; sub(/.*\) \(/,"(",g); sub(/, Context.*/,"",g); gsub(/ /,"",g); printf "\n%-28s %-14s", n, g}
     /gpu__time_duration.sum/{printf " %s %s", $NF, $(NF-1)}
     /sm__cycles_active.avg/{printf " | active %s", $NF}
     /sm__cycles_elapsed.avg/{printf " / %s cyc", $NF}
     /smsp__inst_executed.sum/{printf " | inst %s", $NF}
     /launch__registers_per_thread/{printf " | regs %s", $NF}
     /sm__warps_active/{printf " | occ %s%%", $NF}' "$OUT/ncu.log" 2>/dev/null; echo
grep "gate" "$OUT/bench.log" 2>/dev/null | cut -c1-170
