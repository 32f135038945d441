/* topk.cu — the top-k block gate on the GPU, stream-ordered with no host synchronisation:
     1. pool: mean of each query block / key block per head (fp32, 8 interleaved partial sums combined
        in a fixed tree, as the CPU gate). Fast path (16-bit dtypes, 16-byte aligned rows): Q and K in ONE
        launch, one CTA per pooled vector, every thread issuing all its 16-byte loads (up to 16 rows) before
        the first add. It runs at the DRAM read rate (H100, B=4 H=16 S=8192 D=128: 268 MB in 94 us, 88 % of
        peak), so the gate's floor is reading Q and K once; other inputs take a generic kernel per side;
     2. project (optional): pooled · W in fp64 with fma, d in order;
     3. select: one CTA per (batch, head, 16 query blocks) stages the pooled query vectors and 64 key vectors
        at a time in shared memory (each key vector read from L2 once per 16 query blocks), scores every
        candidate key block (fp64 fma chains in order), keeps the top ones (higher first, ties to the lower
        block), and one warp per query block compacts the kept blocks in ascending order into the full /
        partial lists of the layout; on sm_90 it is launched as a programmatic dependent of the kernel before
        it. nb <= 512: the warp select (a query block's scores in one warp's registers, top-k by warp arg-max
        rounds); larger nb: the tiled select (rank by counting in shared memory); key-block counts whose scores
        do not fit in shared memory: a one-CTA-per-query-block kernel with the same arithmetic.
   Pre-pooled input (params->pooled: q and k hold one row per block, the caller's means) skips step 1: without a
   projection the gate is one launch reading the caller's rows directly (templated on their dtype, each value
   through fp32 to fp64 as the CPU gate converts it): for nb <= 64 and 16-byte vector rows the one-pass pooled
   select (session 7), else for nb <= 512 the warp select; otherwise pooled_in_kernel copies (or projects) the
   rows into the fp64 workspace and the usual selects run.
   Measured (H100, B=4 H=16 S=8192 bf16, block 128, top_k 6, L2 flushed, median of 30; session 6, d9d4132): the
   direct-read select 16.8 us at D=128 (12.8 at D=64) with the default late conversion and no L2 prefetch; early
   conversion 19.4 (14.1), early + L2 prefetch 18.0 (13.2), late + prefetch 17.2 (12.6); through the fp64 workspace
   and the tiled select 55 us; the unpooled gate 116 us (pooling = reading Q and K: 93 us at the copy rate). ncu of
   the early-conversion select (128 registers, 2 CTAs = 16 warps per SM) had shown 42 % of the stall samples on the
   first chunk's global loads: the fp32->fp64 conversion right after each load made the warp wait for it before
   issuing the next (LDG, CVT, LDG, ... in the SASS). The late conversion (WsStage<T, true>) issues all 20 loads of a
   chunk at once and keeps the next chunk's in flight during the fma; with it the L2 prefetch no longer pays.
   The fixed summation orders make the result identical to the CPU gate (src/attention/topk_cpu.c) on every
   path (the CPU follows the pooling order of the pool kernels and the fma chain of the select). */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <limits.h>
#include <stdint.h>
#include "../cuda_internal.h"
#include "../../attention/attention_internal.h"

namespace {

__device__ __forceinline__ float ldf(const void *p, int dtype, int64_t i)
{
    if (dtype == BSK_F32) return reinterpret_cast<const float *>(p)[i];
    if (dtype == BSK_F16) return __half2float(reinterpret_cast<const __half *>(p)[i]);
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
}

struct PoolArgs {
    const void *x;
    int dtype;
    int64_t sb, ss, sh, seq;
    const int32_t *lens; /* per-batch valid rows (clamped to seq), or NULL: seq */
    int heads, nblk, bs, dim;
    int64_t n; /* vectors: batch * heads * nblk */
    double *out;
};

/* One CTA per pooled vector: 8 row groups x ceil(dim/8) dim groups. Row group g sums rows r0+g, r0+g+8, ...
   in ascending order (16-byte loads where aligned); the 8 partial sums are combined in the fixed tree
   ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)) — the order topk_cpu.c follows, so both agree bit for bit. */
__global__ void __launch_bounds__(512) pool_kernel(const PoolArgs a, int vec16)
{
    __shared__ float part[8][512];
    const int ng = (a.dim + 7) / 8, dg = threadIdx.x % ng, rg = threadIdx.x / ng;
    for (int64_t v = blockIdx.x; v < a.n; v += gridDim.x) {
        int64_t blk = v % a.nblk, bh = v / a.nblk, h = bh % a.heads, b = bh / a.heads;
        int64_t len = a.seq;
        if (a.lens) { int64_t t = a.lens[b]; len = t < 0 ? 0 : (t > a.seq ? a.seq : t); }
        int64_t r0 = blk * a.bs, r1 = min(r0 + a.bs, len);
        const int64_t base = b * a.sb + h * a.sh;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t r = r0 + rg; r < r1; r += 8) {
            const int64_t at = base + r * a.ss + dg * 8;
            if (vec16) {
                uint4 raw = *reinterpret_cast<const uint4 *>(reinterpret_cast<const uint16_t *>(a.x) + at);
                const uint16_t *e = reinterpret_cast<const uint16_t *>(&raw);
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    __half_raw hr;
                    hr.x = e[u];
                    float f;
                    if (a.dtype == BSK_F16) f = __half2float(__half(hr));
                    else f = __uint_as_float((uint32_t)e[u] << 16);
                    acc[u] += f;
                }
            } else {
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (dg * 8 + u < a.dim) acc[u] += ldf(a.x, a.dtype, at + u);
            }
        }
        __syncthreads(); /* the previous vector's combine is done with `part` */
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (dg * 8 + u < a.dim) part[rg][dg * 8 + u] = acc[u];
        __syncthreads();
        const int c = threadIdx.x;
        if (c < a.dim) {
            float sum = ((part[0][c] + part[1][c]) + (part[2][c] + part[3][c])) +
                        ((part[4][c] + part[5][c]) + (part[6][c] + part[7][c]));
            a.out[v * a.dim + c] = r1 > r0 ? (double)(sum / (float)(r1 - r0)) : 0.0;
        }
    }
}

/* Fast pool: 16-bit dtype, dim % 8 == 0, 16-byte aligned rows, Q and K in one launch (vectors 0 .. n0-1 are
   side 0, the rest side 1). Block t of a side is (b, blk, h) with h fastest: the CTAs in flight together read
   the same rows of neighbouring heads, i.e. contiguous memory (1 % faster than block-fastest; 8-row bursts ran
   the same as 16, both measured on an H100). Same thread roles and the same fixed order as
   pool_kernel (row group g sums rows r0+g, r0+g+8, ... ascending; the tree combine), so the result is the
   same bit for bit; only the loads are batched: U rows per thread are loaded before the first add, so a
   128-row block is one burst of 16 independent 16-byte loads per thread (32 KB per CTA in flight). */
struct PoolSide {
    const uint16_t *x;
    int64_t sb, ss, sh, seq, n;
    const int32_t *lens;
    int heads, nblk, bs;
    double *out;
};
struct Pool16Args {
    PoolSide s0, s1;
    int dim;
};

template <bool F16>
__device__ __forceinline__ void add8(float *acc, const uint4 raw)
{
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int u = 0; u < 4; u++) {
        if (F16) {
            __half_raw lo, hi;
            lo.x = (unsigned short)(w[u] & 0xffffu);
            hi.x = (unsigned short)(w[u] >> 16);
            acc[2 * u] += __half2float(__half(lo));
            acc[2 * u + 1] += __half2float(__half(hi));
        } else {
            acc[2 * u] += __uint_as_float(w[u] << 16);
            acc[2 * u + 1] += __uint_as_float(w[u] & 0xffff0000u);
        }
    }
}

template <bool F16, int U>
__global__ void __launch_bounds__(512) pool16_kernel(const Pool16Args a)
{
    extern __shared__ float part16[]; /* [8][dim] */
    const int dim = a.dim, ng = dim >> 3, dg = threadIdx.x % ng, rg = threadIdx.x / ng;
    int64_t t = blockIdx.x;
    const bool second = t >= a.s0.n;
    if (second) t -= a.s0.n;
    const uint16_t *x = second ? a.s1.x : a.s0.x;
    const int64_t sb = second ? a.s1.sb : a.s0.sb, ss = second ? a.s1.ss : a.s0.ss, sh = second ? a.s1.sh : a.s0.sh;
    const int64_t seq = second ? a.s1.seq : a.s0.seq;
    const int32_t *lens = second ? a.s1.lens : a.s0.lens;
    const int heads = second ? a.s1.heads : a.s0.heads, nblk = second ? a.s1.nblk : a.s0.nblk;
    const int bs = second ? a.s1.bs : a.s0.bs;
    double *out = second ? a.s1.out : a.s0.out;

    const int64_t h = t % heads, u1 = t / heads, blk = u1 % nblk, b = u1 / nblk;
    int64_t len = seq;
    if (lens) { int64_t l = lens[b]; len = l < 0 ? 0 : (l > seq ? seq : l); }
    const int64_t r0 = blk * bs, r1 = min(r0 + (int64_t)bs, len);
    const uint16_t *base = x + b * sb + h * sh + dg * 8;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t r = r0 + rg; r < r1; r += 8 * U) {
        uint4 raw[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t rr = r + 8 * u;
            raw[u] = rr < r1 ? __ldg(reinterpret_cast<const uint4 *>(base + rr * ss)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            if (r + 8 * u < r1) add8<F16>(acc, raw[u]);
    }
    float *pp = part16 + rg * dim + dg * 8;
    *reinterpret_cast<float4 *>(pp) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    *reinterpret_cast<float4 *>(pp + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    __syncthreads();
    const int c = threadIdx.x; /* blockDim.x == dim */
    const float *p = part16 + c;
    float sum = ((p[0] + p[dim]) + (p[2 * dim] + p[3 * dim])) + ((p[4 * dim] + p[5 * dim]) + (p[6 * dim] + p[7 * dim]));
    out[((b * heads + h) * nblk + blk) * dim + c] = r1 > r0 ? (double)(sum / (float)(r1 - r0)) : 0.0;
}

/* Pre-pooled input on the paths that read the fp64 workspace (projection, the tiled and per-query-block selects):
   pooled row v = (b, h, blk) of a strided tensor into out[v * P + e] — the row as fp32 converted to fp64 (no
   projection, P = dim), or its projection, the fma chain of project_kernel over d in order on the same fp32
   values. */
__global__ void pooled_in_kernel(const void *x, int dtype, int64_t sb, int64_t ss, int64_t sh, int heads, int nblk,
                                 int64_t n, int dim, const void *w, int wdtype, int64_t ld, int P, double *out)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * P) return;
    const int64_t v = t / P, blk = v % nblk, bh = v / nblk, h = bh % heads, b = bh / heads;
    const int e = (int)(t % P);
    const int64_t row = b * sb + blk * ss + h * sh;
    if (!w) { out[t] = (double)ldf(x, dtype, row + e); return; }
    double acc = 0.0;
    for (int d = 0; d < dim; d++)
        acc = fma((double)ldf(x, dtype, row + d), (double)ldf(w, wdtype, (int64_t)d * ld + e), acc);
    out[t] = acc;
}

__global__ void project_kernel(const double *in, int64_t n, int dim, const void *w, int wdtype, int64_t ld, int P,
                               double *out)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * P) return;
    int64_t v = t / P;
    int e = (int)(t % P);
    double acc = 0.0;
    for (int d = 0; d < dim; d++) acc = fma(in[v * dim + d], (double)ldf(w, wdtype, (int64_t)d * ld + e), acc);
    out[t] = acc;
}

struct SelArgs {
    const double *qv, *kv;
    /* the warp select's sources: element e of the pooled vector of (b, h, block i) at src + b*sb + i*ss + h*sh + e —
       the fp64 workspace (qv / kv, packed) or, for pre-pooled input, the caller's tensors read in their dtype */
    const void *qsrc, *ksrc;
    int64_t qsb, qss, qsh, ksb, kss, ksh;
    int l2pf; /* warp select: prefetch all the CTA's rows into L2 first (direct-read pre-pooled rows; hook bit 4: on) */
    int qmap; /* warp select: warp w scores query blocks 4w .. 4w+3 against key blocks 2 lane, +1 (hook bit 5) */
    int exact; /* pooled select: every candidate through the exact fp64 path (hook bit 10, tests) */
    int P, heads, kv_heads, group, mq, nb, bq, bk, causal, top_k, keep_first, keep_diag, cap;
    int64_t seq_q, seq_k, off;
    const int32_t *kv_lens;
    int32_t *fc, *fi, *pc, *pi;
};

/* One step of a layout row's compaction, for a warp: lane's key block j of tile class cls (-1: not kept) goes to the
   full (0) or the partial (1, 2) list in lane order after the nf / np entries so far (capacity-clamped), and the
   counts advance by the warp's entries. Every select ends with these steps over its kept blocks in ascending order. */
__device__ __forceinline__ void emit_step(const SelArgs &a, int64_t row, int j, int cls, int lane, int &nf, int &np)
{
    const unsigned bf = __ballot_sync(0xffffffffu, cls == 0), bp = __ballot_sync(0xffffffffu, cls == 1 || cls == 2);
    const unsigned lower = (1u << lane) - 1u;
    if (cls == 0) { const int at = nf + __popc(bf & lower); if (at < a.cap) a.fi[row * a.cap + at] = j; }
    if (cls == 1 || cls == 2) { const int at = np + __popc(bp & lower); if (at < a.cap) a.pi[row * a.cap + at] = j; }
    nf += __popc(bf);
    np += __popc(bp);
}
__device__ __forceinline__ void emit_counts(const SelArgs &a, int64_t row, int nf, int np, int lane)
{
    if (lane == 0) {
        a.fc[row] = min(nf, a.cap);
        a.pc[row] = min(np, a.cap);
    }
}

/* One warp writes layout row `row` (query rows [q0, q1)) from its kept flags sel[0..nb): the kept key blocks in
   ascending order, split into the full and the partial list by the builders' tile class, counts clamped to
   the capacity. */
__device__ void write_row(const SelArgs &a, int64_t row, int64_t q0, int64_t q1, int64_t kv_len,
                          const unsigned char *sel, int nb, int lane)
{
    int nf = 0, np = 0;
    for (int base = 0; base < nb; base += 32) {
        int j = base + lane;
        int keep = j < nb && sel[j];
        int cls = keep ? bsk__attn_tile_class(q0, q1, (int64_t)j * a.bk, (int64_t)(j + 1) * a.bk, kv_len, a.causal, a.off) : -1;
        emit_step(a, row, j, cls, lane, nf, np);
    }
    emit_counts(a, row, nf, np, lane);
}

__global__ void __launch_bounds__(128) select_kernel(const SelArgs a)
{
    extern __shared__ double sc[];                         /* nb scores */
    unsigned char *st = reinterpret_cast<unsigned char *>(sc + a.nb); /* 0 no, 1 candidate, 2 forced */
    unsigned char *sel = st + a.nb;                        /* kept */
    __shared__ int forced_s;
    const int64_t row = blockIdx.x;
    const int64_t i = row % a.mq, bh = row / a.mq, h = bh % a.heads, b = bh / a.heads, hk = h / a.group;
    int64_t kv_len = a.seq_k;
    if (a.kv_lens) { int64_t t = a.kv_lens[b]; kv_len = t < 0 ? 0 : (t > a.seq_k ? a.seq_k : t); }
    const int64_t q0 = i * a.bq, q1 = min(q0 + a.bq, a.seq_q);
    const double *qa = a.qv + row * a.P;
    for (int j = threadIdx.x; j < a.nb; j += blockDim.x) {
        int cand = bsk__topk_candidate(j, a.bk, q1, kv_len, a.causal, a.off);
        st[j] = (unsigned char)cand;
        sc[j] = -INFINITY;
        if (cand) {
            const double *kb = a.kv + ((b * a.kv_heads + hk) * a.nb + j) * a.P;
            double acc = 0.0;
            for (int e = 0; e < a.P; e++) acc = fma(qa[e], kb[e], acc);
            sc[j] = isnan(acc) ? -INFINITY : acc;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int forced = 0;
        if (a.keep_first && a.nb > 0 && st[0] == 1) { st[0] = 2; forced++; }
        int64_t jd = a.keep_diag ? bsk__topk_diagonal(a.bk, q1, kv_len, a.causal, a.off) : -1;
        if (jd >= 0 && jd < a.nb && st[jd] == 1) { st[jd] = 2; forced++; }
        forced_s = forced;
    }
    __syncthreads();
    const int room = a.top_k - forced_s;
    for (int j = threadIdx.x; j < a.nb; j += blockDim.x) {
        unsigned char keep = st[j] == 2;
        if (st[j] == 1) {
            int rank = 0;
            const double sj = sc[j];
            for (int j2 = 0; j2 < a.nb && rank < room; j2++)
                if (st[j2] == 1 && j2 != j && (sc[j2] > sj || (sc[j2] == sj && j2 < j))) rank++;
            keep = rank < room;
        }
        sel[j] = keep;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    write_row(a, row, q0, q1, kv_len, sel, a.nb, threadIdx.x);
}

/* Tiled select: one CTA (256 threads) per (batch, head, SEL_QT = 16 consecutive query blocks), its shared
   memory: the tile's pooled query vectors qs[SEL_QT][QP], a chunk of SEL_KC = 64 pooled key vectors
   ks[SEL_KC][KP], then per query block of the tile the scores sc[SEL_QT][nb], the states st[SEL_QT][nb] and the
   kept flags sel[SEL_QT][nb]. QP = P rounded up to even, KP = QP + 2: rows start on 16 bytes (pairs of e are
   read as one double2) and lane l's key row starts 4 banks after lane l-1's, so a warp's double2 reads of 32
   key rows take the minimum 4 wavefronts. Thread t scores key c0 + (t % 64) against the 4 query blocks
   4*(t / 64) .. +3 of the tile: per pair of e one double2 of the key (its own) and one broadcast double2 per
   query block feed 8 fma, about 1 shared-memory wavefront per 32 fma (3 with one score per thread). Each score
   is still one fp64 fma chain over e in order — the chain of select_kernel and the CPU — and forcing, ranking
   and compaction follow the same rules, so every path selects the same tiles. Measured (H100, B=4 H=16
   S=8192): 44.6 us, as long as the one-score-per-thread version and independent of P and of causal: the
   O(nb^2) ranking in shared memory is the cost (confirmed by ncu's source counters: see the warp select below,
   which replaces this kernel for nb <= 512). */
#define SEL_QT 16
#define SEL_KC 64
#define SEL_RPT 4 /* query blocks per thread */
#define SEL_THREADS 256

size_t select_tiled_smem(int P, int nb)
{
    const size_t QP = (size_t)(P + (P & 1)), KP = QP + 2;
    return ((size_t)SEL_QT * QP + (size_t)SEL_KC * KP + (size_t)SEL_QT * nb) * sizeof(double) + 2 * (size_t)SEL_QT * nb;
}

/* Copy n doubles from global src into shared dst, element x to dst[(x / P) * ld + x % P], with 16 independent
   loads per thread in flight before the first store: a chunk costs one L2 round trip, not one per element (a
   plain load-store loop compiles to one load in flight at a time). */
__device__ __forceinline__ void stage_rows(double *dst, const double *src, int n, int P, int ld)
{
    for (int x0 = 0; x0 < n; x0 += 16 * SEL_THREADS) {
        double v[16];
#pragma unroll
        for (int u = 0; u < 16; u++) {
            const int x = x0 + u * SEL_THREADS + (int)threadIdx.x;
            v[u] = x < n ? src[x] : 0.0;
        }
#pragma unroll
        for (int u = 0; u < 16; u++) {
            const int x = x0 + u * SEL_THREADS + (int)threadIdx.x;
            if (x < n) {
                const int j = x / P;
                dst[j * ld + (x - j * P)] = v[u];
            }
        }
    }
}

__global__ void __launch_bounds__(SEL_THREADS) select_tiled_kernel(const SelArgs a)
{
    extern __shared__ double smd[];
    const int P = a.P, nb = a.nb, QP = P + (P & 1), KP = QP + 2;
    double *qs = smd, *ks = qs + SEL_QT * QP, *sc = ks + SEL_KC * KP;
    unsigned char *st = reinterpret_cast<unsigned char *>(sc + SEL_QT * nb); /* 0 no, 1 candidate, 2 forced */
    unsigned char *sel = st + SEL_QT * nb;                                   /* kept */
    __shared__ int room_s[SEL_QT];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched as a programmatic dependent of the pool (or projection) kernel: wait for its results; then let
       the next kernel (the attention) launch: its CTAs do their setup and wait for this grid (PDL) */
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
#endif
    const int tiles = (a.mq + SEL_QT - 1) / SEL_QT, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int64_t bh = blockIdx.x / tiles, h = bh % a.heads, b = bh / a.heads, hk = h / a.group;
    const int i0 = (int)(blockIdx.x % tiles) * SEL_QT, nrow = min(SEL_QT, a.mq - i0);
    const int64_t row0 = bh * a.mq + i0;
    int64_t kv_len = a.seq_k;
    if (a.kv_lens) { int64_t t = a.kv_lens[b]; kv_len = t < 0 ? 0 : (t > a.seq_k ? a.seq_k : t); }

    stage_rows(qs, a.qv + row0 * P, nrow * P, P, QP);
    if (P & 1) /* the pad column is read as the second half of the last pair, never used */
        for (int i = tid; i < SEL_QT; i += SEL_THREADS) qs[i * QP + P] = 0.0;
    const double *kbase = a.kv + (b * a.kv_heads + hk) * (int64_t)nb * P;
    const int kl = tid % SEL_KC, g = tid / SEL_KC; /* key lane, group of SEL_RPT query blocks */
    for (int c0 = 0; c0 < nb; c0 += SEL_KC) {
        const int kc = min(SEL_KC, nb - c0);
        __syncthreads(); /* the previous chunk's readers are done with ks */
        stage_rows(ks, kbase + (int64_t)c0 * P, kc * P, P, KP);
        if (P & 1)
            for (int j = tid; j < kc; j += SEL_THREADS) ks[j * KP + P] = 0.0;
        __syncthreads();
        if (kl >= kc || g * SEL_RPT >= nrow) continue;
        const double *kr = ks + kl * KP, *qr = qs + g * SEL_RPT * QP;
        double acc[SEL_RPT];
#pragma unroll
        for (int r = 0; r < SEL_RPT; r++) acc[r] = 0.0;
        int e = 0;
#pragma unroll 4
        for (; e + 1 < P; e += 2) {
            const double2 kv2 = *reinterpret_cast<const double2 *>(kr + e);
#pragma unroll
            for (int r = 0; r < SEL_RPT; r++) {
                const double2 q2 = *reinterpret_cast<const double2 *>(qr + r * QP + e);
                acc[r] = fma(q2.x, kv2.x, acc[r]);
                acc[r] = fma(q2.y, kv2.y, acc[r]);
            }
        }
        if (e < P) {
#pragma unroll
            for (int r = 0; r < SEL_RPT; r++) acc[r] = fma(qr[r * QP + e], kr[e], acc[r]);
        }
        const int j = c0 + kl;
#pragma unroll
        for (int r = 0; r < SEL_RPT; r++) {
            const int i = g * SEL_RPT + r;
            if (i >= nrow) break;
            const int64_t q1 = min((int64_t)(i0 + i) * a.bq + a.bq, a.seq_q);
            const int cand = bsk__topk_candidate(j, a.bk, q1, kv_len, a.causal, a.off);
            sc[i * nb + j] = cand && !isnan(acc[r]) ? acc[r] : -INFINITY;
            st[i * nb + j] = (unsigned char)cand;
        }
    }
    __syncthreads();
    if (tid < nrow) {
        const int64_t q1t = min((int64_t)(i0 + tid) * a.bq + a.bq, a.seq_q);
        unsigned char *s = st + tid * nb;
        int forced = 0;
        if (a.keep_first && nb > 0 && s[0] == 1) { s[0] = 2; forced++; }
        int64_t jd = a.keep_diag ? bsk__topk_diagonal(a.bk, q1t, kv_len, a.causal, a.off) : -1;
        if (jd >= 0 && jd < nb && s[jd] == 1) { s[jd] = 2; forced++; }
        room_s[tid] = a.top_k - forced;
    }
    __syncthreads();
    for (int x = tid; x < nrow * nb; x += SEL_THREADS) {
        const int i = x / nb, j = x - i * nb;
        const unsigned char *s = st + i * nb;
        const double *sci = sc + i * nb;
        unsigned char keep = s[j] == 2;
        if (s[j] == 1) {
            const int room = room_s[i];
            int rank = 0;
            const double sj = sci[j];
            for (int j2 = 0; j2 < nb && rank < room; j2++)
                if (s[j2] == 1 && j2 != j && (sci[j2] > sj || (sci[j2] == sj && j2 < j))) rank++;
            keep = rank < room;
        }
        sel[x] = keep;
    }
    __syncthreads();
    for (int i = w; i < nrow; i += SEL_THREADS / 32) {
        const int64_t row = row0 + i, q0 = (int64_t)(i0 + i) * a.bq, q1 = min(q0 + a.bq, a.seq_q);
        write_row(a, row, q0, q1, kv_len, sel + i * nb, nb, lane);
    }
}

/* Warp select (issue 7's rework of the tiled select; key-block counts nb <= 512). One CTA (256 threads, 8 warps)
   per (batch, head, WS_QT = 16 consecutive query blocks), in two phases:
   - scores: a 16 x 64 tile of S = Qpool · Kpoolᵀ per chunk of 64 key blocks, the score elements e in chunks of
     WS_EC = 64 staged transposed in shared memory (qT[e][16 query blocks], kT[e][64 key blocks]) from registers
     loaded one chunk ahead (the next chunk's global loads are in flight during the current chunk's fma). Warps
     0..3 (one per SM sub-partition) score, lane (lq, lk) of warp w a 4 x 2 block: query blocks 4 lq .. +3 and key
     blocks 16 w + 2 lk, +1; per e two double2 reads of query values (one address per quarter warp) and one of key
     values (128 contiguous bytes per quarter warp) feed 8 DFMA. Each score is one fp64 fma chain over e in order:
     the chain of every other path and of the CPU gate.
   - selection: warp w takes query blocks w and w + 8; lane l holds the scores of key blocks l + 32 t (t < KPL)
     in registers as 64-bit order keys. Forced blocks are kept; of the other candidates it keeps the `room` best
     (higher score first, ties to the lower block: the CPU gate's rank order) by `room` rounds of a warp arg-max
     (three 32-bit warp reductions per round), or, when room > half the candidates, drops the worst by the
     mirrored rounds — at most nb / 2 rounds. The kept bits are compacted in ascending order into the full /
     partial lists as write_row does.
   What the tiled select cost (ncu, H100, B=4 H=16 S=8192 D=128, 45 us = 88.9 K cycles, 20.8 M warp
   instructions): its per-candidate count over all key blocks in shared memory was 54 % of the stall samples and
   62 % of the instructions (two dependent shared loads and a branch per comparison, each warp running until its
   slowest lane finished), the integer division x / P of its staging loop 16 %, the scoring 12 %. The first warp
   select (run 1: 2 x 2 blocks on all 8 warps, per-load 64-bit address arithmetic) took 17.6 us: 6.4 M
   instructions (a third of them address arithmetic of the staging loads), shared-memory wavefronts at ~1.5 per
   double2 read (4 wavefronts per 4 DFMA: the scoring bound by shared memory, fp64 pipe 12 % busy). This version
   (run 2): 15.6 us (D=64: 11.8), 5.2 M instructions; stall samples: scoring 39 % (warps 0..3 waiting on their
   shared loads, warps 4..7 at the barrier), staging 19 % (global-load latency), selection and compaction 30 %.
   Next: deeper load pipelining in the scoring loop, 32-bit per-row candidate bounds in the selection. */
#define WS_QT 16
#define WS_KC 64
#define WS_EC 64
#define WS_QS (WS_QT + 2) /* 144-byte rows: 16-byte aligned double2 reads, 2-way bank conflict on the staging store */
#define WS_KS (WS_KC + 2)
#define WS_THREADS 256
#define WS_KL ((WS_KC * WS_EC) / WS_THREADS) /* key elements each thread stages per chunk: 16 */
#define WS_QL ((WS_QT * WS_EC) / WS_THREADS) /* query elements: 4 */

size_t select_warp_smem(int kpl)
{
    return ((size_t)WS_EC * (WS_KS + WS_QS) + (size_t)WS_QT * 32 * (size_t)kpl) * sizeof(double);
}

/* Chunk n = (key chunk n / ne, element chunk n % ne) of the CTA's key and query vectors into registers: thread t
   takes element x = u * 256 + t of the chunk (x / 64 the key or query block, x % 64 the element), so a warp reads
   256 contiguous bytes of one vector; out-of-range entries are 0 (never used for a kept score). Every load is
   one offset from a per-chunk base (rows 4 apart): run 1 spent a third of the kernel's instructions on 64-bit
   address arithmetic per load. */
/* L2 prefetch of the line holding p (PTX prefetch.global.L2: a hint, no register, no wait; every architecture). */
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

__device__ __forceinline__ double ld_d(const double *p) { return *p; }
__device__ __forceinline__ double ld_d(const float *p) { return (double)*p; }
__device__ __forceinline__ double ld_d(const __half *p) { return (double)__half2float(*p); }
__device__ __forceinline__ double ld_d(const __nv_bfloat16 *p) { return (double)__bfloat162float(*p); }

__device__ __forceinline__ double cvt_d(double x) { return x; }
__device__ __forceinline__ double cvt_d(float x) { return (double)x; }
__device__ __forceinline__ double cvt_d(__half x) { return (double)__half2float(x); }
__device__ __forceinline__ double cvt_d(__nv_bfloat16 x) { return (double)__bfloat162float(x); }

/* How a chunk's loads are held in registers until the staging store: as fp64 converted at the load (LATE = false:
   the fp64 workspace, whose loads need no conversion), or raw in the source type, converted at the store (LATE: the conversion no longer waits for the
   loads right after issuing them, so the next chunk's loads stay in flight during the scoring — ncu showed the
   early conversion stalling on them; the default for pre-pooled rows, hook bit 6 selects the early one). */
template <typename T, bool LATE> struct WsStage {
    typedef double S;
    static __device__ __forceinline__ S ld(const T *p) { return ld_d(p); }
    static __device__ __forceinline__ S zero() { return 0.0; }
};
template <typename T> struct WsStage<T, true> {
    typedef T S;
    static __device__ __forceinline__ S ld(const T *p) { return *p; }
    static __device__ __forceinline__ S zero() { return (S)0.0f; }
};

/* T: the source's element type (double: the fp64 workspace, row stride P; a 16-bit or fp32 type: pre-pooled rows
   of the caller's tensor, row stride kss / qss, each value converted through fp32 as the CPU gate does). */
template <typename T, bool LATE>
__device__ __forceinline__ void ws_fetch(const T *kbase, int64_t kss, const T *qbase, int64_t qss, int nb, int nrow,
                                         int P, int n, int ne, typename WsStage<T, LATE>::S *kr,
                                         typename WsStage<T, LATE>::S *qr)
{
    typedef WsStage<T, LATE> St;
    const int c0 = (n / ne) * WS_KC, e0 = (n % ne) * WS_EC, e = (int)threadIdx.x & (WS_EC - 1);
    const int r = (int)threadIdx.x / WS_EC; /* first row: r, then r + 4, r + 8, ... */
    const bool eok = e0 + e < P;
    const int64_t kstep = (int64_t)(WS_THREADS / WS_EC) * kss, qstep = (int64_t)(WS_THREADS / WS_EC) * qss;
    const T *kp = kbase + ((int64_t)(c0 + r) * kss + e0 + e), *qp = qbase + ((int64_t)r * qss + e0 + e);
#pragma unroll
    for (int u = 0; u < WS_KL; u++) {
        kr[u] = eok && c0 + r + u * (WS_THREADS / WS_EC) < nb ? St::ld(kp) : St::zero();
        kp += kstep;
    }
#pragma unroll
    for (int u = 0; u < WS_QL; u++) {
        qr[u] = eok && r + u * (WS_THREADS / WS_EC) < nrow ? St::ld(qp) : St::zero();
        qp += qstep;
    }
}

/* A double as a 64-bit key whose unsigned order is the score order: NaN counts as -inf (as on every path) and
   -0 as +0 (they compare equal there, so they must tie here too). Every key of a real score has a non-zero upper
   word (the smallest, -inf, is 0x000FFFFF'FFFFFFFF; its complement is at most 0xFFF00000'00000000). */
__device__ __forceinline__ uint64_t score_key(double s)
{
    if (isnan(s)) s = -INFINITY;
    if (s == 0.0) s = 0.0;
    const uint64_t u = (uint64_t)__double_as_longlong(s);
    return (u >> 63) ? ~u : (u | 0x8000000000000000ull);
}

/* The 8 fma of one score element of a lane's 4 x 2 block (query values q[0..3], key values k[0..1]), each score's
   chain in e order: fp64 (as on every path and in the CPU gate) or the fp32 pre-scores of the pooled select. */
__device__ __forceinline__ double fmx(double a, double b, double c) { return fma(a, b, c); }
__device__ __forceinline__ float fmx(float a, float b, float c) { return fmaf(a, b, c); }
template <typename F>
__device__ __forceinline__ void fma4x2v(F (&acc)[4][2], const F q0, const F q1, const F q2, const F q3, const F k0, const F k1)
{
    const F q[4] = {q0, q1, q2, q3};
#pragma unroll
    for (int r = 0; r < 4; r++) {
        acc[r][0] = fmx(q[r], k0, acc[r][0]);
        acc[r][1] = fmx(q[r], k1, acc[r][1]);
    }
}
/* fp64: two double2 reads of query values, one of key values */
__device__ __forceinline__ void fma4x2(double (&acc)[4][2], const double *q, const double *k)
{
    const double2 qa = *reinterpret_cast<const double2 *>(q), qb = *reinterpret_cast<const double2 *>(q + 2);
    const double2 k2 = *reinterpret_cast<const double2 *>(k);
    fma4x2v(acc, qa.x, qa.y, qb.x, qb.y, k2.x, k2.y);
}

/* n rounds over the entries of `avail` (bit t of lane l: key block l + 32 t): each round takes the best entry not
   yet taken — the highest key, ties to the lower block (REV: the lowest key, ties to the higher block, i.e. the
   last in rank order) — and returns the taken bits. Within a lane the scan order settles ties (lower t = lower
   block); across lanes the key is reduced as two 32-bit maxima, then the block number as a minimum (maximum). */
template <int KPL, bool REV>
__device__ __forceinline__ unsigned ws_rounds(const uint64_t *key, unsigned avail, int n, int lane)
{
    unsigned taken = 0;
    for (int r = 0; r < n; r++) {
        const unsigned left = avail & ~taken;
        uint64_t best = 0;
        int bt = -1;
#pragma unroll
        for (int s = 0; s < KPL; s++) {
            const int t = REV ? KPL - 1 - s : s;
            const uint64_t k = REV ? ~key[t] : key[t];
            if (((left >> t) & 1u) && (bt < 0 || k > best)) { best = k; bt = t; }
        }
        const unsigned hi = bt >= 0 ? (unsigned)(best >> 32) : 0u;
        const unsigned mh = __reduce_max_sync(0xffffffffu, hi);
        if (mh == 0) break; /* nothing left (n never exceeds the entries; kept for safety) */
        const unsigned lo = bt >= 0 && hi == mh ? (unsigned)best : 0u;
        const unsigned ml = __reduce_max_sync(0xffffffffu, lo);
        const bool win = bt >= 0 && hi == mh && lo == ml;
        int j;
        if (REV) j = __reduce_max_sync(0xffffffffu, win ? lane + 32 * bt : -1);
        else j = __reduce_min_sync(0xffffffffu, win ? lane + 32 * bt : INT_MAX);
        if ((j & 31) == lane) taken |= 1u << (j >> 5);
    }
    return taken;
}

template <int KPL, typename T, bool LATE>
__global__ void __launch_bounds__(WS_THREADS) select_warp_kernel(const SelArgs a)
{
    extern __shared__ double wsm[];
    const int P = a.P, nb = a.nb, SCS = 32 * KPL;
    double *kT = wsm, *qT = kT + WS_EC * WS_KS, *sc = qT + WS_EC * WS_QS; /* sc[WS_QT][SCS] */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* launched as a programmatic dependent of the pool (or projection) kernel: wait for its results; then let
       the next kernel (the attention) launch: its CTAs do their setup and wait for this grid (PDL) */
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
#endif
    const int tiles = (a.mq + WS_QT - 1) / WS_QT, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int64_t bh = blockIdx.x / tiles, h = bh % a.heads, b = bh / a.heads, hk = h / a.group;
    const int i0 = (int)(blockIdx.x % tiles) * WS_QT, nrow = min(WS_QT, a.mq - i0);
    const int64_t row0 = bh * a.mq + i0;
    int64_t kv_len = a.seq_k;
    if (a.kv_lens) { int64_t t = a.kv_lens[b]; kv_len = t < 0 ? 0 : (t > a.seq_k ? a.seq_k : t); }

    /* ---- scores */
    const T *kbase = reinterpret_cast<const T *>(a.ksrc) + b * a.ksb + hk * a.ksh;
    const T *qbase = reinterpret_cast<const T *>(a.qsrc) + b * a.qsb + h * a.qsh + (int64_t)i0 * a.qss;
    const int ne = (P + WS_EC - 1) / WS_EC, nchunks = ((nb + WS_KC - 1) / WS_KC) * ne;
    if (a.l2pf) {
        /* every 128-byte line of the CTA's key rows (nb) and query rows (nrow) requested into L2 at once, so the
           later element chunks' loads hit L2 instead of each exposing a DRAM round trip; line addresses stay
           inside each row (the last one clamped to its last byte) */
        const int rowbytes = P * (int)sizeof(T), lpr = (rowbytes + 127) / 128 + 1;
        for (int x = tid; x < (nb + nrow) * lpr; x += WS_THREADS) {
            const int rr = x / lpr, l = x - rr * lpr;
            const char *rp = rr < nb ? reinterpret_cast<const char *>(kbase + (int64_t)rr * a.kss)
                                     : reinterpret_cast<const char *>(qbase + (int64_t)(rr - nb) * a.qss);
            prefetch_l2(rp + min(l * 128, rowbytes - 1));
        }
    }
    /* scoring warps 0..3 (one per SM sub-partition): warp w the key blocks 16 w .. 16 w + 15 of the chunk against
       all 16 query blocks; lane (lq, lk) query blocks 4 lq .. 4 lq + 3 and key blocks 16 w + 2 lk, + 1 */
    /* a.qmap: warp w the query blocks 4 w .. 4 w + 3 (one uniform address per query read: a broadcast) against all
       64 key blocks of the chunk, lane l the key blocks 2 l, 2 l + 1 (one contiguous 512-byte key read per warp);
       the same 4 x 2 block per lane and the same fma chain per score, with a different split of the tile */
    const int qi = a.qmap ? 4 * w : 4 * (lane >> 3), kj = a.qmap ? 2 * lane : 16 * w + 2 * (lane & 7);
    typename WsStage<T, LATE>::S kr[WS_KL], qr[WS_QL];
    ws_fetch<T, LATE>(kbase, a.kss, qbase, a.qss, nb, nrow, P, 0, ne, kr, qr);
    double acc[4][2];
#pragma unroll
    for (int r = 0; r < 4; r++) acc[r][0] = acc[r][1] = 0.0;
    for (int n = 0; n < nchunks; n++) {
        __syncthreads(); /* the previous chunk's readers are done with kT / qT */
        {
            const int e = tid & (WS_EC - 1);
#pragma unroll
            for (int u = 0; u < WS_KL; u++) kT[e * WS_KS + (u * WS_THREADS + tid) / WS_EC] = cvt_d(kr[u]);
#pragma unroll
            for (int u = 0; u < WS_QL; u++) qT[e * WS_QS + (u * WS_THREADS + tid) / WS_EC] = cvt_d(qr[u]);
        }
        __syncthreads();
        if (n + 1 < nchunks) ws_fetch<T, LATE>(kbase, a.kss, qbase, a.qss, nb, nrow, P, n + 1, ne, kr, qr); /* in flight during the fma */
        if (w < 4) {
            const int e0 = (n % ne) * WS_EC, ec = min(WS_EC, P - e0);
            const double *qp = qT + qi, *kp = kT + kj;
#pragma unroll 4
            for (int e = 0; e < ec; e++) {
                fma4x2(acc, qp + e * WS_QS, kp + e * WS_KS);
            }
            if (n % ne == ne - 1) { /* this key chunk's scores are complete */
                const int c = (n / ne) * WS_KC + kj;
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    *reinterpret_cast<double2 *>(sc + (qi + r) * SCS + c) = make_double2(acc[r][0], acc[r][1]);
                    acc[r][0] = acc[r][1] = 0.0;
                }
            }
        }
    }
    __syncthreads();

    /* ---- selection and layout rows, one warp per query block */
    for (int i = w; i < nrow; i += WS_THREADS / 32) {
        const int64_t row = row0 + i, q0 = (int64_t)(i0 + i) * a.bq, q1 = min(q0 + a.bq, a.seq_q);
        const int64_t jd = a.keep_diag ? bsk__topk_diagonal(a.bk, q1, kv_len, a.causal, a.off) : -1;
        uint64_t key[KPL];
        unsigned cand = 0, forced = 0;
#pragma unroll
        for (int t = 0; t < KPL; t++) {
            const int j = lane + 32 * t;
            key[t] = 0;
            if (j < nb && bsk__topk_candidate(j, a.bk, q1, kv_len, a.causal, a.off)) {
                key[t] = score_key(sc[i * SCS + j]);
                if ((a.keep_first && j == 0) || j == jd) forced |= 1u << t;
                else cand |= 1u << t;
            }
        }
        const int nc = __reduce_add_sync(0xffffffffu, __popc(cand));
        const int room = a.top_k - __reduce_add_sync(0xffffffffu, __popc(forced));
        unsigned keep = forced;
        if (room >= nc) keep |= cand;
        else if (room > 0) {
            if (room <= nc - room) keep |= ws_rounds<KPL, false>(key, cand, room, lane);
            else keep |= cand & ~ws_rounds<KPL, true>(key, cand, nc - room, lane);
        }
        /* compaction: key blocks in ascending order (t outer, lanes inner), as write_row */
        int nf = 0, np = 0;
#pragma unroll
        for (int t = 0; t < KPL; t++) {
            if (32 * t >= nb) break;
            const int j = lane + 32 * t;
            const int cls = (keep >> t) & 1u ? bsk__attn_tile_class(q0, q1, (int64_t)j * a.bk, (int64_t)(j + 1) * a.bk, kv_len,
                                                                     a.causal, a.off)
                                             : -1;
            emit_step(a, row, j, cls, lane, nf, np);
        }
        emit_counts(a, row, nf, np, lane);
    }
}

/* Pooled select (sessions 7 and 8): the pre-pooled direct-read gate for nb <= 64 key blocks, rows of at most 512
   bytes in 16-byte aligned vectors. One CTA per (batch, head, NRT row tiles of 16 query blocks): NRT = 2 (default,
   512 threads) takes tiles t and T - 1 - t (T tiles per head), so that under causal masking every CTA scores about
   the same number of (query block, key block) pairs; NRT = 1 (256 threads, hook bit 512) one tile. One pass:
   - every thread issues all its 16-byte loads of the CTA's rows at once (key k = tid % 64 of element groups
     tid / 64, + KGS, ...; query row tid % QR of groups tid / QR, + 16), key blocks no row of the CTA can take (past
     kv_len, or after the last row's causal limit) not at all. Each value goes to shared memory as fp32 (exact:
     bf16, f16 and f32 values are fp32 values), transposed (kT[e][64], qT[e][QR]), and each thread adds the squares
     of its values to a partial sum of its row's squared norm;
   - pre-scores in fp32 on all warps: warp (row tile, e-half, key group of 16) x lane (4 query blocks x 2 key
     blocks), one float4 query read and one float2 key read per 8 FFMA, 4 interleaved chains per score, the two
     e-halves added in the selection; a warp whose key group holds no candidate of its row tile skips, and the key
     groups rotate with the SMSP so that a causal CTA's live warps spread over the four SMSPs;
   - selection, warp w: CTA rows w and w + WARPS, rounds interleaved. The CPU gate keeps the `room` best candidates
     by their fp64 fma chain (ties to the lower block). The fp32 pre-score v_j differs from that fp64 score by at
     most E (ps_bound: the rounding of both sums bounded by (gamma_32(d) + gamma_64(P)) sum_e |q_e k_e| <=
     (...) ||q|| max_j ||k_j||, plus underflow terms), so after fp32 rounds pick the room best by v (the set T),
     a candidate of T whose v exceeds the best v outside T by more than 2 E is kept for sure, one outside T whose
     v is more than 2 E below the worst of T is dropped for sure; only the rest (A: typically none, on a near tie
     the two at the boundary, on exact ties all) gets its exact fp64 chain (the CPU's, over e in order from the
     same fp32 values) and the room - |sure| best of A by exact score and the CPU's tie rule join the sure ones —
     the CPU's selection by construction. Non-finite pre-scores or bound: every candidate goes to A. Up to two
     members per warp (the usual case) have their key rows converted to fp64 by all lanes first, so that each chain
     is loads and DFMA only; more take one lane each, converting as they go. Hook bit 1024 sends every candidate of
     every row to A (the exact path everywhere, tests);
   - compaction of the kept blocks in ascending order into the full / partial lists, as write_row.
   The output lines of the CTA's layout rows are prefetched to L2 at the start.
   Session 7's one-pass select scored every pair in fp64 (4 warps, fp64 staging): 14.9 us at D=128, 11.6 at D=64
   (H100, B4 H16 S8192, top_k 6); session 8's figures: docs/attention-notes.md. */
#define PS_QT 16

size_t select_pooled_smem(int P, int nrt)
{
    const size_t QR = (size_t)PS_QT * nrt, threads = 256 * (size_t)nrt, warps = threads / 32;
    return warps * 2 * (size_t)P * sizeof(double) +                       /* qd: exact path's query rows */
           ((size_t)P * (64 + QR) + QR * 128 + (threads / 64) * 64 + 17 * QR) * sizeof(float); /* kT qT sc knp qnp e2s */
}

/* 16-byte vector of the source type as fp32 values (bf16 / f16: 8, f32: 4): exact conversions. */
__device__ __forceinline__ float ps_f32(const __nv_bfloat16 *, uint32_t bits) { return __uint_as_float(bits << 16); }
__device__ __forceinline__ float ps_f32(const __half *, uint32_t bits)
{
    __half_raw r;
    r.x = (unsigned short)bits;
    return __half2float(__half(r));
}
template <typename T> struct PsVec {
    enum { N = 8 };
    static __device__ __forceinline__ void cvt(const uint4 r, float *o)
    {
        const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int u = 0; u < 4; u++) {
            o[2 * u] = ps_f32((const T *)0, w[u] & 0xffffu);
            o[2 * u + 1] = ps_f32((const T *)0, w[u] >> 16);
        }
    }
};
template <> struct PsVec<float> {
    enum { N = 4 };
    static __device__ __forceinline__ void cvt(const uint4 r, float *o)
    {
        o[0] = __uint_as_float(r.x);
        o[1] = __uint_as_float(r.y);
        o[2] = __uint_as_float(r.z);
        o[3] = __uint_as_float(r.w);
    }
};

/* Significand bits of the source type (bf16 8, f16 11, f32 24): the exact path's test for exact fp64 sums. */
template <typename T> struct PsBits { enum { SB = 8 }; };
template <> struct PsBits<__half> { enum { SB = 11 }; };
template <> struct PsBits<float> { enum { SB = 24 }; };

/* One 16-byte vector of a row (its element group g) into a transposed fp32 array, dst[e * ld + col] for the
   vector's elements e, and the squares of its values added to ss (the same staging for key and query rows). */
template <typename T>
__device__ __forceinline__ void ps_stage(const uint4 r, int g, float *dst, int ld, int col, float &ss)
{
    float v[PsVec<T>::N];
    PsVec<T>::cvt(r, v);
#pragma unroll
    for (int x = 0; x < PsVec<T>::N; x++) {
        dst[(g * PsVec<T>::N + x) * ld + col] = v[x];
        ss = fmaf(v[x], v[x], ss);
    }
}

/* fp32: one float4 read of query values, one float2 of key values, into one of the interleaved chains */
__device__ __forceinline__ void fma4x2f(float (&acc)[4][2], const float *q, const float *k)
{
    const float4 q4 = *reinterpret_cast<const float4 *>(q);
    const float2 k2 = *reinterpret_cast<const float2 *>(k);
    fma4x2v(acc, q4.x, q4.y, q4.z, q4.w, k2.x, k2.y);
}

/* Error bound of the pre-score. For a query row and a key row (P elements, fp32 values), the fp32 pre-score v
   (4 interleaved fma chains over each e-half, combined (c0 + c1) + (c2 + c3), the halves added) and the CPU's fp64
   fma chain s over e in order satisfy |v - s| <= E: each product term meets at most d = ceil(P / 8) + 3 fp32
   roundings and P fp64 ones, so |v - S| <= gamma_32(d) sum|q_e k_e| and |s - S| <= gamma_64(P) sum|q_e k_e| (S
   the exact sum), sum|q_e k_e| <= ||q|| ||k|| (Cauchy-Schwarz), ||x||^2 <= (ss + P 2^-125) / (1 - gamma_32(P)) for
   ss the fp32 sum of the squares (any order). gamma_32(d) + gamma_64(P) <= 2 d 2^-24 and 1 / (1 - gamma_32(P)) <=
   1 + P 2^-22 for P <= 256. Absolute terms cover underflow and, were the build ever flushing fp32 denormals, their
   flush (per operation 2^-126; a flushed input x_e costs |x_e y_e| <= 2^-126 |y_e|, at most 2^-126 sqrt(P) ||y||):
   2^-125 (P + 8 + 16 (||q|| + ||k||)). Computed in fp32 with every operation rounded up (all terms are
   non-negative), so the result bounds the exact expression; overflow gives +inf and NaN input NaN, and the
   caller's tests (difference rounded down > 2 E) then fail: the exact path. ps_norm_up: the bound of ||x|| from ss. */
__device__ __forceinline__ float ps_norm_up(float ss, int P)
{
    return __fsqrt_ru(__fmul_ru(__fadd_ru(ss, (float)P * 0x1p-125f), 1.0f + (float)P * 0x1p-22f));
}
__device__ __forceinline__ float ps_bound2(float nqs, float nks, int P) /* 2 E, from the norm bounds */
{
    const float gup = (float)(2 * ((P + 7) / 8 + 3)) * 0x1p-24f;
    const float abs_err = __fmul_ru(__fadd_ru((float)(P + 8), __fmul_ru(16.0f, __fadd_ru(nqs, nks))), 0x1p-125f);
    return __fmul_ru(2.0f, __fadd_ru(__fmul_ru(__fmul_ru(gup, nks), nqs), abs_err));
}

/* A float as a 32-bit key whose unsigned order is the float order (-0 below +0; NaN never reaches it), and back. */
__device__ __forceinline__ unsigned ps_key32(float f)
{
    const unsigned u = __float_as_uint(f);
    return (u >> 31) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float ps_unkey32(unsigned k) { return __uint_as_float((k >> 31) ? (k & 0x7fffffffu) : ~k); }

/* n[x] + 1 rounds over row x's 32-bit keys (bit t of lane l: key block l + 32 t; key 0: not available), NR rows at
   once: each round takes the largest key left (the winner: the lowest lane holding it); taken[x] the first n[x]
   winners, kn[x] the n[x]-th round's key, kn1[x] the (n[x] + 1)-th round's. Equal keys may go either way: the
   caller trusts only separations beyond the error bound. n[x] == 0: nothing. */
template <int NR>
__device__ __forceinline__ void ps_rounds32(const unsigned (&key)[NR][2], const int (&n)[NR], unsigned (&taken)[NR],
                                            unsigned (&kn)[NR], unsigned (&kn1)[NR], int lane)
{
    int nmax = 0;
#pragma unroll
    for (int x = 0; x < NR; x++) {
        taken[x] = kn[x] = kn1[x] = 0;
        if (n[x] > 0) nmax = max(nmax, n[x] + 1);
    }
    for (int r = 0; r < nmax; r++) {
        unsigned lk[NR], m[NR];
        int lt[NR];
#pragma unroll
        for (int x = 0; x < NR; x++) {
            const unsigned k0 = (taken[x] & 1u) ? 0u : key[x][0], k1 = (taken[x] & 2u) ? 0u : key[x][1];
            lt[x] = k1 > k0;
            lk[x] = n[x] > 0 && r <= n[x] ? (lt[x] ? k1 : k0) : 0u;
            m[x] = __reduce_max_sync(0xffffffffu, lk[x]);
        }
#pragma unroll
        for (int x = 0; x < NR; x++) {
            const unsigned win = __ballot_sync(0xffffffffu, m[x] != 0u && lk[x] == m[x]);
            if (r < n[x] && win && lane == __ffs(win) - 1) taken[x] |= 1u << lt[x];
            if (r == n[x] - 1) kn[x] = m[x];
            if (r == n[x]) kn1[x] = m[x];
        }
    }
}

/* bsk__topk_candidate, bsk__topk_diagonal and bsk__attn_tile_class in 32-bit arithmetic: the host takes this kernel
   only where every sequence position, block size and offset stays far below 2^31 (ps_fits), so the results are
   the same; in 64 bits the selection took ~1000 instructions per warp (ncu, run 1), a third of them 64-bit compares
   and the diagonal's 64-bit division call. */
__device__ __forceinline__ bool ps_cand(int j, int bk, int q1, int kvl, int causal, int off)
{
    return j * bk < kvl && (!causal || j * bk <= q1 - 1 + off);
}
__device__ __forceinline__ int ps_diag(int bk, int q1, int kvl, int causal, int off)
{
    const int key = min(q1 - 1 + off, kvl - 1);
    if (key < 0) return -1;
    const int jd = key / bk;
    return ps_cand(jd, bk, q1, kvl, causal, off) ? jd : -1;
}
__device__ __forceinline__ int ps_class(int q0, int q1, int k0, int k1, int kvl, int causal, int off)
{
    if (k0 >= kvl || q1 <= q0 || k1 <= k0) return 2;
    if (causal && k0 > q1 - 1 + off) return 2;
    if (k1 > kvl) return 1;
    if (causal && k1 - 1 > q0 + off) return 1;
    return 0;
}

/* ws_rounds for NR rows at once: row x takes n[x] rounds over avail[x] (rev[x]: the mirrored rounds, lowest key
   first, ties to the higher block); the rows' reductions are independent, so they overlap. Scanning t upwards,
   an equal key replaces the best only in the mirrored direction (the higher block wins there). */
template <int KPL, int NR>
__device__ __forceinline__ void ps_rounds(const uint64_t (&key)[NR][KPL], const unsigned (&avail)[NR], const int (&n)[NR],
                                          const bool (&rev)[NR], unsigned (&taken)[NR], int lane)
{
    int nmax = 0;
#pragma unroll
    for (int x = 0; x < NR; x++) { taken[x] = 0; nmax = max(nmax, n[x]); }
    for (int r = 0; r < nmax; r++) {
        unsigned hi[NR], mh[NR];
        uint64_t best[NR];
        int bt[NR];
#pragma unroll
        for (int x = 0; x < NR; x++) {
            const unsigned left = r < n[x] ? avail[x] & ~taken[x] : 0u;
            best[x] = 0;
            bt[x] = -1;
#pragma unroll
            for (int t = 0; t < KPL; t++) {
                const uint64_t k = rev[x] ? ~key[x][t] : key[x][t];
                if (((left >> t) & 1u) && (bt[x] < 0 || k > best[x] || (rev[x] && k == best[x]))) { best[x] = k; bt[x] = t; }
            }
            hi[x] = bt[x] >= 0 ? (unsigned)(best[x] >> 32) : 0u;
            mh[x] = __reduce_max_sync(0xffffffffu, hi[x]);
        }
        unsigned ml[NR];
#pragma unroll
        for (int x = 0; x < NR; x++)
            ml[x] = __reduce_max_sync(0xffffffffu, bt[x] >= 0 && hi[x] == mh[x] ? (unsigned)best[x] : 0u);
#pragma unroll
        for (int x = 0; x < NR; x++) {
            const bool win = bt[x] >= 0 && hi[x] == mh[x] && (unsigned)best[x] == ml[x];
            const int j = lane + 32 * bt[x];
            const int v = __reduce_min_sync(0xffffffffu, win ? (rev[x] ? 1023 - j : j) : INT_MAX);
            const int jw = rev[x] ? 1023 - v : v;
            if (r < n[x] && mh[x] != 0 && (jw & 31) == lane) taken[x] |= 1u << (jw >> 5);
        }
    }
}

/* Member idx of a warp's set A, numbered (row x, slot t, lane) in that order from the ballots bxt of A's slot-t bits
   of row x: 64 x + its key block. */
__device__ __forceinline__ int ps_member(int idx, unsigned b00, unsigned b01, unsigned b10, unsigned b11)
{
    const int c00 = __popc(b00), c01 = __popc(b01), c10 = __popc(b10);
    unsigned mk;
    int xt;
    if (idx < c00) { xt = 0; mk = b00; }
    else if ((idx -= c00) < c01) { xt = 1; mk = b01; }
    else if ((idx -= c01) < c10) { xt = 2; mk = b10; }
    else { idx -= c10; xt = 3; mk = b11; }
    for (int c = 0; c < idx; c++) mk &= mk - 1u;
    return 64 * (xt >> 1) + __ffs(mk) - 1 + 32 * (xt & 1);
}

template <typename T, int NRT>
__global__ void __launch_bounds__(256 * NRT, 2 / NRT) select_pooled_kernel(const SelArgs a)
{
    enum { THREADS = 256 * NRT, QR = PS_QT * NRT, KGS = THREADS / 64, NKU = 32 / KGS, WARPS = THREADS / 32 };
    typedef PsVec<T> V;
    extern __shared__ double psm[];
    const int P = a.P, nb = a.nb, EG = P / V::N; /* 16-byte groups per row (<= 32) */
    double *qd = psm;                                            /* [WARPS][2][P]: exact path, query rows in fp64 */
    float *kT = reinterpret_cast<float *>(qd + WARPS * 2 * P);  /* [P][64] */
    float *qT = kT + P * 64;                                     /* [P][QR] */
    float *sc = qT + P * QR;                                     /* [QR][2][64]: the e-halves' pre-scores */
    float *knp = sc + QR * 128;                                  /* [KGS][64]: partial squared norms of key rows */
    float *qnp = knp + KGS * 64;                                 /* [16][QR]: of query rows */
    float *e2s = qnp + 16 * QR;                                  /* [QR]: each CTA row's 2 E (ps_bound2) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* PDL: wait for the previous kernel's writes (a no-op without a PDL predecessor); then let the next kernel
       launch at once (the attention launched with PDL: its setup runs under this gate, its griddepcontrol.wait
       holds its reads of the layout until this grid has finished) */
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
#endif
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int h = (int)blockIdx.y, b = (int)blockIdx.z, hk = h / a.group;
    const int seq_k = (int)a.seq_k, seq_q = (int)a.seq_q, off = (int)a.off, bq = a.bq, bk = a.bk;
    /* row tiles: first query block ti0[r], rows tnr[r] (0: absent) */
    const int ntile = (a.mq + PS_QT - 1) / PS_QT, t0 = (int)blockIdx.x, t1 = NRT == 2 ? ntile - 1 - t0 : t0;
    /* (scalars, selected by the tile index: indexed arrays went to local memory) */
    const int ti0a = t0 * PS_QT, tnra = min(PS_QT, a.mq - ti0a), ti0b = t1 * PS_QT;
    const int tnrb = NRT == 2 && t1 != t0 ? min(PS_QT, a.mq - ti0b) : 0;
    const int tq1a = min((ti0a + tnra) * bq, seq_q), tq1b = tnrb > 0 ? min((ti0b + tnrb) * bq, seq_q) : 0; /* last row's end */
    int kvl = seq_k;
    if (a.kv_lens) { const int t = a.kv_lens[b]; kvl = t < 0 ? 0 : (t > seq_k ? seq_k : t); }
    const int q1max = max(tq1a, tq1b);

    /* ---- all loads at once: key blocks some row of the CTA can take, the CTA's query rows */
    const int kk = tid & 63, kg = tid >> 6, qq = tid % QR, qg = tid / QR, qm = qq & (PS_QT - 1), qr = qq / PS_QT;
    const bool kload = kk < nb && ps_cand(kk, bk, q1max, kvl, a.causal, off), qload = qm < (qr ? tnrb : tnra);
    const T *kp = reinterpret_cast<const T *>(a.ksrc) + b * a.ksb + hk * a.ksh + kk * a.kss + kg * V::N;
    const T *qp = reinterpret_cast<const T *>(a.qsrc) + b * a.qsb + h * a.qsh + (int64_t)((qr ? ti0b : ti0a) + qm) * a.qss +
                  qg * V::N;
    uint4 kr[NKU], qv[2];
#pragma unroll
    for (int u = 0; u < NKU; u++)
        kr[u] = kload && kg + KGS * u < EG ? __ldg(reinterpret_cast<const uint4 *>(kp + KGS * u * V::N)) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 2; u++)
        qv[u] = qload && qg + 16 * u < EG ? __ldg(reinterpret_cast<const uint4 *>(qp + 16 * u * V::N)) : make_uint4(0, 0, 0, 0);
    if (w == WARPS - 1 && lane < 4 * NRT && ((lane >> 2) ? tnrb : tnra) > 0) { /* the layout lines this CTA writes */
        const int64_t row0 = ((int64_t)b * a.heads + h) * a.mq + ((lane >> 2) ? ti0b : ti0a);
        const int c = lane & 3;
        const int32_t *o = c == 0 ? a.fc + row0 : c == 1 ? a.pc + row0 : c == 2 ? a.fi + row0 * a.cap : a.pi + row0 * a.cap;
        if (a.cap > 0 || c < 2) prefetch_l2(o);
    }

    /* ---- fp32 in shared memory, transposed; partial squared norms */
    {
        float ss = 0.0f;
#pragma unroll
        for (int u = 0; u < NKU; u++)
            if (kg + KGS * u < EG) ps_stage<T>(kr[u], kg + KGS * u, kT, 64, kk, ss);
        knp[kg * 64 + kk] = ss;
        ss = 0.0f;
#pragma unroll
        for (int u = 0; u < 2; u++)
            if (qg + 16 * u < EG) ps_stage<T>(qv[u], qg + 16 * u, qT, QR, qq, ss);
        qnp[qg * QR + qq] = ss;
    }
    __syncthreads();

    /* ---- the error bounds, by the last warp before its scoring (off the selection's critical path): the largest
       squared norm of a key block that is a candidate anywhere (fp32 bits: the order of non-negative floats; NaN
       above +inf), each CTA row's squared norm (16 partial sums), its 2 E */
    if (w == WARPS - 1) {
        unsigned knb = 0;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int j = lane + 32 * t;
            if (j < nb && j * bk < kvl) {
                float s = 0.0f;
#pragma unroll
                for (int c = 0; c < KGS; c++) s += knp[c * 64 + j];
                knb = max(knb, __float_as_uint(s));
            }
        }
        const float nks = ps_norm_up(__uint_as_float(__reduce_max_sync(0xffffffffu, knb)), P);
        if (lane < QR) {
            float nq = 0.0f;
#pragma unroll
            for (int c = 0; c < 16; c++) nq += qnp[c * QR + lane];
            e2s[lane] = ps_bound2(ps_norm_up(nq, P), nks, P);
        }
    }
    /* ---- fp32 pre-scores: warp (row tile r, e-half hh, key group g) */
    {
        /* key group g = (SMSP + 2 hh + r) mod 4 (warp w runs on SMSP w mod 4): the live tasks of a causal CTA (tile t
           needs groups 0 .. t) spread over the four SMSPs, at most 3 per SMSP where the identity map put 4 on SMSP 0 */
        const int r = w >> 3, hh = (w >> 2) & 1, g = ((w & 3) + 2 * hh + r) & 3;
        if ((r ? tnrb : tnra) > 0 && 16 * g < nb && ps_cand(16 * g, bk, r ? tq1b : tq1a, kvl, a.causal, off)) {
            const int qi = PS_QT * r + 4 * (lane >> 3), kj = 16 * g + 2 * (lane & 7), eh = P >> 1;
            const float *qs = qT + hh * eh * QR + qi, *ks = kT + hh * eh * 64 + kj;
            float acc[4][4][2];
#pragma unroll
            for (int s = 0; s < 4; s++)
#pragma unroll
                for (int x = 0; x < 4; x++) acc[s][x][0] = acc[s][x][1] = 0.0f;
            int e = 0;
#pragma unroll 2
            for (; e + 4 <= eh; e += 4) {
#pragma unroll
                for (int s = 0; s < 4; s++) fma4x2f(acc[s], qs + (e + s) * QR, ks + (e + s) * 64);
            }
            if (e < eh) fma4x2f(acc[0], qs + e * QR, ks + e * 64);
            if (e + 1 < eh) fma4x2f(acc[1], qs + (e + 1) * QR, ks + (e + 1) * 64);
            if (e + 2 < eh) fma4x2f(acc[2], qs + (e + 2) * QR, ks + (e + 2) * 64);
#pragma unroll
            for (int x = 0; x < 4; x++) {
                float2 o;
                o.x = (acc[0][x][0] + acc[1][x][0]) + (acc[2][x][0] + acc[3][x][0]);
                o.y = (acc[0][x][1] + acc[1][x][1]) + (acc[2][x][1] + acc[3][x][1]);
                *reinterpret_cast<float2 *>(sc + (qi + x) * 128 + hh * 64 + kj) = o;
            }
        }
    }
    __syncthreads();

    /* ---- selection: warp w, CTA rows w and w + WARPS */
    const int NR = 2;
    unsigned cand[NR], forced[NR], keep[NR], sure[NR], amb[NR], key[NR][2];
    int n[NR], q0[NR], q1[NR], room[NR], mrow[NR];
    bool rev[NR];
    float v[NR][2];
    float E2[NR];
#pragma unroll
    for (int x = 0; x < NR; x++) {
        const int m = w + WARPS * x, r = m / PS_QT, mi = m & (PS_QT - 1);
        const bool live = mi < (r ? tnrb : tnra);
        mrow[x] = m;
        q0[x] = ((r ? ti0b : ti0a) + mi) * bq;
        q1[x] = min(q0[x] + bq, seq_q);
        const int jd = live && a.keep_diag ? ps_diag(bk, q1[x], kvl, a.causal, off) : -1;
        cand[x] = forced[x] = 0;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int j = lane + 32 * t;
            if (live && j < nb && ps_cand(j, bk, q1[x], kvl, a.causal, off)) {
                if ((a.keep_first && j == 0) || j == jd) forced[x] |= 1u << t;
                else cand[x] |= 1u << t;
            }
        }
        const int nc = __reduce_add_sync(0xffffffffu, __popc(cand[x]));
        room[x] = a.top_k - __reduce_add_sync(0xffffffffu, __popc(forced[x]));
        keep[x] = forced[x] | (room[x] >= nc ? cand[x] : 0u);
        sure[x] = amb[x] = 0;
        n[x] = 0;
        rev[x] = false;
        if (room[x] > 0 && room[x] < nc) { /* warp-uniform */
            bool bad = a.exact != 0;
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const int j = lane + 32 * t;
                v[x][t] = 0.0f;
                if ((cand[x] >> t) & 1u) {
                    v[x][t] = sc[m * 128 + j] + sc[m * 128 + 64 + j];
                    bad |= !isfinite(v[x][t]);
                }
            }
            E2[x] = e2s[m];
            bad |= !(E2[x] < INFINITY);
            if (__any_sync(0xffffffffu, bad)) amb[x] = cand[x]; /* every candidate to the exact path */
            else {
                rev[x] = room[x] > nc - room[x];
                n[x] = rev[x] ? nc - room[x] : room[x];
            }
#pragma unroll
            for (int t = 0; t < 2; t++) {
                const unsigned k = ps_key32(v[x][t]);
                key[x][t] = n[x] > 0 && ((cand[x] >> t) & 1u) ? (rev[x] ? ~k : k) : 0u;
            }
        } else {
#pragma unroll
            for (int t = 0; t < 2; t++) { v[x][t] = 0.0f; key[x][t] = 0u; }
            E2[x] = 0.0f;
        }
    }
    /* fp32 rounds: T = the room best by pre-score; the boundary pair (the worst of T, the best outside T) */
    {
        unsigned taken[NR], kn[NR], kn1[NR];
        ps_rounds32<NR>(key, n, taken, kn, kn1, lane);
#pragma unroll
        for (int x = 0; x < NR; x++) {
            if (n[x] == 0) continue; /* warp-uniform */
            const float vb = ps_unkey32(rev[x] ? ~kn[x] : kn[x]), vb1 = ps_unkey32(rev[x] ? ~kn1[x] : kn1[x]);
            const float lo_in = rev[x] ? vb1 : vb, hi_out = rev[x] ? vb : vb1;
            const unsigned in_t = rev[x] ? cand[x] & ~taken[x] : taken[x];
#pragma unroll
            for (int t = 0; t < 2; t++) {
                if (!((cand[x] >> t) & 1u)) continue;
                const float vj = v[x][t]; /* differences rounded down */
                if ((in_t >> t) & 1u) {
                    if (__fsub_rd(vj, hi_out) > E2[x]) sure[x] |= 1u << t;
                    else amb[x] |= 1u << t;
                } else if (!(__fsub_rd(lo_in, vj) > E2[x])) amb[x] |= 1u << t;
            }
        }
    }
    /* exact path for the candidates in A: their fp64 chains (the CPU's), then the room - |sure| best of A */
    if (__any_sync(0xffffffffu, (amb[0] | amb[1]) != 0u)) { /* warp-uniform */
        __syncwarp(); /* every lane has read its pre-scores: the rows' sc lines become the exact scores */
        /* the members of A, (row x, slot t, lane) in that order: ballots b00 b01 b10 b11 */
        const unsigned b00 = __ballot_sync(0xffffffffu, amb[0] & 1u), b01 = __ballot_sync(0xffffffffu, amb[0] & 2u);
        const unsigned b10 = __ballot_sync(0xffffffffu, amb[1] & 1u), b11 = __ballot_sync(0xffffffffu, amb[1] & 2u);
        const int c00 = __popc(b00), c01 = __popc(b01), c10 = __popc(b10), total = c00 + c01 + c10 + __popc(b11);
        if (total <= 2) {
            /* the usual case (the boundary pair), member by member with all lanes: lane l takes the terms e = l + 32 i as
               exact fp64 products into its own fma chain and the range of the terms' exponents. If every partial sum of
               the terms is a multiple of the smallest term's last bit below 2^53 of them (exponent range + 2 x the
               significand bits + log2 P <= 53), every fp64 operation on them is exact in any order: the CPU's chain
               gives the exact sum, which the lanes' chains and a shuffle tree then give bit for bit (bf16 / f16 rows
               of ordinary range: ~150 cycles where the sequential chain took ~1.5 us). Otherwise lane 0 runs the
               chain (f32 rows, wide ranges, denormal or non-finite values). */
            for (int m = 0; m < total; m++) {
                const int xj = ps_member(m, b00, b01, b10, b11), x = xj >> 6, j = xj & 63, mr = x ? mrow[1] : mrow[0];
                double part = 0.0;
                int smin = INT_MAX, smax = INT_MIN, odd = 0;
                for (int e = lane; e < P; e += 32) {
                    const float qf = qT[e * QR + mr], kf = kT[e * 64 + j];
                    const unsigned qb = __float_as_uint(qf) & 0x7fffffffu, kb = __float_as_uint(kf) & 0x7fffffffu;
                    const int qe = (int)(qb >> 23), ke = (int)(kb >> 23);
                    odd |= qe == 255 || ke == 255 || (qe == 0 && qb) || (ke == 0 && kb);
                    if (qb && kb) { smin = min(smin, qe + ke); smax = max(smax, qe + ke); }
                    part = fma((double)qf, (double)kf, part);
                }
                smin = __reduce_min_sync(0xffffffffu, smin);
                smax = __reduce_max_sync(0xffffffffu, smax);
                double acc = 0.0;
                if (!__any_sync(0xffffffffu, odd) && (smax < smin || smax - smin + 2 * PsBits<T>::SB + (32 - __clz(P - 1)) <= 53)) {
#pragma unroll
                    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
                    acc = part;
                } else if (lane == 0) {
                    for (int e = 0; e < P; e++) acc = fma((double)qT[e * QR + mr], (double)kT[e * 64 + j], acc);
                }
                if (lane == 0) reinterpret_cast<double *>(sc + mr * 128)[j] = acc;
            }
        } else {
#pragma unroll
            for (int x = 0; x < NR; x++)
                if (x ? (b10 | b11) : (b00 | b01))
#pragma unroll 4
                    for (int e = lane; e < P; e += 32) qd[(w * 2 + x) * P + e] = (double)qT[e * QR + mrow[x]];
            __syncwarp();
            for (int base = 0; base < total; base += 32) { /* lane: member base + lane, converting as it goes */
                if (base + lane < total) {
                    const int xj = ps_member(base + lane, b00, b01, b10, b11), x = xj >> 6, j = xj & 63;
                    const double *qx = qd + (w * 2 + x) * P;
                    const float *kc = kT + j;
                    double acc = 0.0;
#pragma unroll 8
                    for (int e = 0; e < P; e++) acc = fma(qx[e], (double)kc[e * 64], acc);
                    reinterpret_cast<double *>(sc + (x ? mrow[1] : mrow[0]) * 128)[j] = acc;
                }
            }
        }
        __syncwarp();
        uint64_t xkey[NR][2];
        int xn[NR];
        bool xrev[NR];
#pragma unroll
        for (int x = 0; x < NR; x++) {
            const double *ex = reinterpret_cast<const double *>(sc + mrow[x] * 128);
#pragma unroll
            for (int t = 0; t < 2; t++) xkey[x][t] = (amb[x] >> t) & 1u ? score_key(ex[lane + 32 * t]) : 0;
            const int na = x ? c10 + __popc(b11) : c00 + c01;
            const int want = room[x] - __reduce_add_sync(0xffffffffu, __popc(sure[x]));
            xn[x] = 0;
            xrev[x] = false;
            if (want >= na) sure[x] |= amb[x];
            else if (want > 0) {
                xrev[x] = want > na - want;
                xn[x] = xrev[x] ? na - want : want;
            }
        }
        unsigned taken[NR];
        ps_rounds<2, NR>(xkey, amb, xn, xrev, taken, lane);
#pragma unroll
        for (int x = 0; x < NR; x++)
            if (xn[x] > 0) sure[x] |= xrev[x] ? amb[x] & ~taken[x] : taken[x];
    }
#pragma unroll
    for (int x = 0; x < NR; x++) {
        const int m = mrow[x], r = m / PS_QT, mi = m & (PS_QT - 1);
        if (mi >= (r ? tnrb : tnra)) continue; /* warp-uniform */
        keep[x] |= sure[x];
        const int64_t row = ((int64_t)b * a.heads + h) * a.mq + (r ? ti0b : ti0a) + mi;
        int nf = 0, np = 0;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            if (32 * t >= nb) break;
            const int j = lane + 32 * t;
            const int cls = (keep[x] >> t) & 1u ? ps_class(q0[x], q1[x], j * bk, (j + 1) * bk, kvl, a.causal, off) : -1;
            emit_step(a, row, j, cls, lane, nf, np);
        }
        emit_counts(a, row, nf, np, lane);
    }
}

/* 16-byte loads of 8 elements: a 16-bit dtype, dim a multiple of 8, rows 16-byte aligned. */
int vec16_ok(const bsk_attn_tensor *t)
{
    return t->dtype != BSK_F32 && t->dim % 8 == 0 && ((uintptr_t)t->data & 15u) == 0 && t->stride_batch % 8 == 0 &&
           t->stride_seq % 8 == 0 && t->stride_head % 8 == 0;
}

/* Rows read as 16-byte vectors of ve elements: the base 16-byte aligned, every stride a multiple of ve. */
int rows16_ok(const bsk_attn_tensor *t, int ve)
{
    return ((uintptr_t)t->data & 15u) == 0 && t->stride_batch % ve == 0 && t->stride_seq % ve == 0 && t->stride_head % ve == 0;
}

unsigned grid_for(int64_t n, int64_t per)
{
    int64_t g = (n + per - 1) / per;
    return (unsigned)(g < 1 ? 1 : (g > (1 << 30) ? (1 << 30) : g));
}

/* Launch one of the CTA-tiled selects (grid `ctas`, dynamic shared memory `smem`) with programmatic dependent
   launch: its launch overlaps the previous kernel's tail. Only where the running image was compiled for sm_90+
   (ptxVersion), i.e. holds the kernel's griddepcontrol.wait, and not under variant bit 2. */
template <typename K>
bsk_status launch_select(K kernel, const struct bsk_cuda_state *cst, int variant, dim3 grid, int threads, size_t smem,
                         cudaStream_t stream, const SelArgs &sa)
{
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) { (void)cudaGetLastError(); return bsk_cuda_status(e); } /* not sticky: clear it */
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = grid;
    cfg.blockDim = dim3((unsigned)threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 0;
    cudaFuncAttributes fa;
    if (!(variant & 4) && cst->cc_major >= 9 && cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.ptxVersion >= 90) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.numAttrs = 1;
    }
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, sa);
    if (e != cudaSuccess) { (void)cudaGetLastError(); return bsk_cuda_status(e); }
    return BSK_SUCCESS;
}
template <typename K>
bsk_status launch_select(K kernel, const struct bsk_cuda_state *cst, int variant, int64_t ctas, int threads, size_t smem,
                         cudaStream_t stream, const SelArgs &sa)
{
    return launch_select(kernel, cst, variant, dim3((unsigned)ctas), threads, smem, stream, sa);
}

} // namespace

/* Benchmark / test hook (bench/gate_probe.sh, tests/test_topk_gpu.c), 0 in normal use: bit 0 runs the generic
   pool kernel (one launch per side), bit 1 the one-CTA-per-query-block select, bit 2 launches the select without
   programmatic dependent launch, bit 3 the tiled select where the warp select would run (the select of session
   3), bit 4 turns on the direct-read warp select's L2 prefetch of its rows (pre-pooled input; the workspace paths
   never prefetch), bit 5 the warp select's query-per-warp scoring split (a.qmap: measured neutral), bit 6 the early
   conversion of pre-pooled rows (WsStage<T, false>, the default before session 6), bit 7 (128) the direct-read warp
   select where the one-pass pooled select would run (the default of session 6), bit 9 (512) the one-pass pooled select
   with one row tile of 16 query blocks per CTA (256 threads) instead of two, bit 10 (1024) its exact fp64 path for
   every candidate (tests); variant 3 is the gate as it was before issue 7's rework. Every variant selects the same
   tiles. */
extern "C" int bsk__topk_variant;
int bsk__topk_variant = 0;

extern "C" bsk_status bsk_cuda_topk_block_layout(bsk_context *ctx, const bsk_topk_params *p, const bsk__attn_dims *d,
                                                 bsk_attn_layout *out)
{
    struct bsk_cuda_state *cst = bsk_cuda_state_get(ctx);
    if (!cst) return BSK_ERR_OUT_OF_MEMORY;
    if (d->nb > 8192 || d->batch * d->heads * d->mq > INT32_MAX) return BSK_ERR_UNSUPPORTED;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    const int64_t D = d->dim, P = p->w_q ? p->w_q->cols : D;
    const int64_t nq = d->batch * d->heads * d->mq, nk = d->batch * d->kv_heads * d->nb;
    const int variant = bsk__topk_variant;
    const int nb = (int)d->nb, kpl = nb <= 64 ? 2 : nb <= 128 ? 4 : nb <= 256 ? 8 : nb <= 512 ? 16 : 0;
    const size_t wsm = kpl ? select_warp_smem(kpl) : 0;
    const bool warp_sel = !(variant & 10) && kpl && wsm <= cst->smem_optin;
    bsk_status s;

    SelArgs sa;
    sa.P = (int)P; sa.heads = (int)d->heads; sa.kv_heads = (int)d->kv_heads;
    sa.group = (int)(d->heads / d->kv_heads); sa.mq = (int)d->mq; sa.nb = (int)d->nb; sa.bq = out->block_q;
    sa.bk = out->block_k; sa.causal = p->causal; sa.top_k = p->top_k; sa.keep_first = p->keep_first;
    sa.keep_diag = p->keep_diagonal; sa.cap = out->capacity; sa.seq_q = d->seq_q; sa.seq_k = d->seq_k;
    sa.off = p->causal_offset; sa.kv_lens = p->kv_lens;
    sa.fc = out->full_count; sa.fi = out->full_idx; sa.pc = out->part_count; sa.pi = out->part_idx;
    sa.l2pf = 0;
    sa.qmap = (variant & 32) != 0;
    sa.exact = 0;

    if (p->pooled && !p->w_q && warp_sel) {
        /* pre-pooled input, no projection: the warp select reads the caller's rows directly — the whole gate is
           this one launch (no workspace, no pooling pass) */
        sa.qv = sa.kv = NULL;
        sa.qsrc = p->q.data; sa.qsb = p->q.stride_batch; sa.qss = p->q.stride_seq; sa.qsh = p->q.stride_head;
        sa.ksrc = p->k.data; sa.ksb = p->k.stride_batch; sa.kss = p->k.stride_seq; sa.ksh = p->k.stride_head;
        /* late conversion of the loaded rows (their loads stay in flight during the scoring), no L2 prefetch: the
           fastest of the four (see the head of this file); bits 4 / 6 select the others */
        sa.l2pf = (variant & 16) != 0;
        const bool late = !(variant & 64);
        const int ve = p->q.dtype == BSK_F32 ? 4 : 8, esz = p->q.dtype == BSK_F32 ? 4 : 2;
        int nrt = (variant & 512) ? 1 : 2; /* row tiles per CTA (two: 512 threads; one where two do not fit) */
        if (nrt == 2 && select_pooled_smem((int)P, 2) > cst->smem_optin) nrt = 1;
        const size_t psm = select_pooled_smem((int)P, nrt);
        /* 32-bit positions in the kernel (ps_cand, ps_class: j * bk, q1 - 1 + off stay below 2^31) */
        const int64_t lim = (int64_t)1 << 29, offa = p->causal_offset < 0 ? -p->causal_offset : p->causal_offset;
        const bool ps_fits = d->seq_q <= lim && d->seq_k <= lim && offa <= lim && out->block_q <= (1 << 22) &&
                             out->block_k <= (1 << 22) && d->heads <= 65535 && d->batch <= 65535;
        if (!(variant & 128) && nb <= 64 && P % ve == 0 && P * esz <= 512 && rows16_ok(&p->q, ve) && rows16_ok(&p->k, ve) &&
            psm <= cst->smem_optin && ps_fits) {
            /* the one-pass pooled select: fp32 pre-scores, exact fp64 chains only near the cut-off (session 8) */
            const int64_t tiles = (d->mq + PS_QT - 1) / PS_QT;
            const dim3 ctas((unsigned)(nrt == 2 ? (tiles + 1) / 2 : tiles), (unsigned)d->heads, (unsigned)d->batch);
            const int threads = 256 * nrt;
            sa.exact = (variant & 1024) != 0;
#define BSK_TOPK_POOLED(T) (nrt == 2 ? launch_select(select_pooled_kernel<T, 2>, cst, variant, ctas, threads, psm, stream, sa) \
                                     : launch_select(select_pooled_kernel<T, 1>, cst, variant, ctas, threads, psm, stream, sa))
            if (p->q.dtype == BSK_BF16) s = BSK_TOPK_POOLED(__nv_bfloat16);
            else if (p->q.dtype == BSK_F16) s = BSK_TOPK_POOLED(__half);
            else s = BSK_TOPK_POOLED(float);
#undef BSK_TOPK_POOLED
            if (s) return s;
            ctx->last_kernel = "cuda-topk";
            return BSK_SUCCESS;
        }
        const int64_t ctas = d->batch * d->heads * ((d->mq + WS_QT - 1) / WS_QT);
#define BSK_TOPK_WARP_TL(T, L)                                                                                          \
    (kpl == 2 ? launch_select(select_warp_kernel<2, T, L>, cst, variant, ctas, WS_THREADS, wsm, stream, sa)            \
     : kpl == 4 ? launch_select(select_warp_kernel<4, T, L>, cst, variant, ctas, WS_THREADS, wsm, stream, sa)          \
     : kpl == 8 ? launch_select(select_warp_kernel<8, T, L>, cst, variant, ctas, WS_THREADS, wsm, stream, sa)          \
                : launch_select(select_warp_kernel<16, T, L>, cst, variant, ctas, WS_THREADS, wsm, stream, sa))
#define BSK_TOPK_WARP_T(T) (late ? BSK_TOPK_WARP_TL(T, true) : BSK_TOPK_WARP_TL(T, false))
        if (p->q.dtype == BSK_BF16) s = BSK_TOPK_WARP_T(__nv_bfloat16);
        else if (p->q.dtype == BSK_F16) s = BSK_TOPK_WARP_T(__half);
        else s = BSK_TOPK_WARP_T(float);
#undef BSK_TOPK_WARP_T
#undef BSK_TOPK_WARP_TL
        if (s) return s;
        ctx->last_kernel = "cuda-topk";
        return BSK_SUCCESS;
    }

    size_t bytes = p->pooled ? (size_t)(nq + nk) * (size_t)P * 8 : (size_t)(nq + nk) * (size_t)D * 8;
    if (!p->pooled && p->w_q) bytes += (size_t)(nq + nk) * (size_t)P * 8;
    void *ws = NULL;
    if ((s = bsk_cuda_workspace(ctx, bytes, &ws))) return s;
    double *qv = (double *)ws, *kv = qv + nq * (p->pooled ? P : D);

    const int64_t nblk_q = d->mq, nblk_k = d->nb;
    if (p->pooled) {
        /* pre-pooled input on a workspace path: the rows (projected if asked) into the fp64 workspace */
        const void *wq = p->w_q ? p->w_q->data : NULL, *wk = p->w_k ? p->w_k->data : NULL;
        const int wqt = p->w_q ? p->w_q->dtype : 0, wkt = p->w_k ? p->w_k->dtype : 0;
        const int64_t lq = p->w_q ? p->w_q->ld : 0, lk = p->w_k ? p->w_k->ld : 0;
        pooled_in_kernel<<<grid_for(nq * P, 256), 256, 0, stream>>>(p->q.data, p->q.dtype, p->q.stride_batch, p->q.stride_seq,
                                                                    p->q.stride_head, (int)d->heads, (int)nblk_q, nq, (int)D,
                                                                    wq, wqt, lq, (int)P, qv);
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        if (nk > 0) {
            pooled_in_kernel<<<grid_for(nk * P, 256), 256, 0, stream>>>(p->k.data, p->k.dtype, p->k.stride_batch,
                                                                        p->k.stride_seq, p->k.stride_head, (int)d->kv_heads,
                                                                        (int)nblk_k, nk, (int)D, wk, wkt, lk, (int)P, kv);
            if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        }
    } else if (!(variant & 1) && vec16_ok(&p->q) && vec16_ok(&p->k) && D <= 512) {
        /* both sides in one launch (nk == 0 only when kv_heads or batch is 0: then nothing of K is read) */
        Pool16Args a;
        a.s0.x = (const uint16_t *)p->q.data; a.s0.sb = p->q.stride_batch; a.s0.ss = p->q.stride_seq;
        a.s0.sh = p->q.stride_head; a.s0.seq = d->seq_q; a.s0.n = nq; a.s0.lens = NULL; a.s0.heads = (int)d->heads;
        a.s0.nblk = (int)nblk_q; a.s0.bs = out->block_q; a.s0.out = qv;
        a.s1.x = (const uint16_t *)p->k.data; a.s1.sb = p->k.stride_batch; a.s1.ss = p->k.stride_seq;
        a.s1.sh = p->k.stride_head; a.s1.seq = d->seq_k; a.s1.n = nk; a.s1.lens = p->kv_lens;
        a.s1.heads = (int)d->kv_heads; a.s1.nblk = (int)nblk_k; a.s1.bs = out->block_k; a.s1.out = kv;
        a.dim = (int)D;
        const size_t psm = (size_t)8 * (size_t)D * sizeof(float);
        if (nq + nk > (int64_t)INT32_MAX) return BSK_ERR_UNSUPPORTED;
        const unsigned grid = (unsigned)(nq + nk), threads = (unsigned)D;
        const int f16 = p->q.dtype == BSK_F16;
        if (f16) pool16_kernel<true, 16><<<grid, threads, psm, stream>>>(a);
        else pool16_kernel<false, 16><<<grid, threads, psm, stream>>>(a);
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
    } else {
        PoolArgs pa;
        pa.x = p->q.data; pa.dtype = p->q.dtype; pa.sb = p->q.stride_batch; pa.ss = p->q.stride_seq; pa.sh = p->q.stride_head;
        pa.seq = d->seq_q; pa.lens = NULL; pa.heads = (int)d->heads; pa.nblk = (int)nblk_q; pa.bs = out->block_q;
        pa.dim = (int)D; pa.n = nq; pa.out = qv;
        const int pool_threads = 8 * (int)((D + 7) / 8);
        pool_kernel<<<grid_for(nq, 1), pool_threads, 0, stream>>>(pa, vec16_ok(&p->q));
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        pa.x = p->k.data; pa.sb = p->k.stride_batch; pa.ss = p->k.stride_seq; pa.sh = p->k.stride_head;
        pa.seq = d->seq_k; pa.lens = p->kv_lens; pa.heads = (int)d->kv_heads; pa.nblk = (int)nblk_k; pa.bs = out->block_k;
        pa.n = nk; pa.out = kv;
        if (nk > 0) {
            pool_kernel<<<grid_for(nk, 1), pool_threads, 0, stream>>>(pa, vec16_ok(&p->k));
            if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        }
    }
    if (!p->pooled && p->w_q) {
        double *qp = kv + nk * D, *kp = qp + nq * P;
        project_kernel<<<grid_for(nq * P, 256), 256, 0, stream>>>(qv, nq, (int)D, p->w_q->data, p->w_q->dtype,
                                                                p->w_q->ld, (int)P, qp);
        if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        if (nk > 0) {
            project_kernel<<<grid_for(nk * P, 256), 256, 0, stream>>>(kv, nk, (int)D, p->w_k->data, p->w_k->dtype,
                                                                    p->w_k->ld, (int)P, kp);
            if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
        }
        qv = qp;
        kv = kp;
    }
    /* the workspace vectors, packed [batch][heads][blocks][P] */
    sa.qv = qv; sa.kv = kv;
    sa.qsrc = qv; sa.qsb = d->heads * d->mq * P; sa.qss = P; sa.qsh = d->mq * P;
    sa.ksrc = kv; sa.ksb = d->kv_heads * d->nb * P; sa.kss = P; sa.ksh = d->nb * P;
    const size_t tsm = select_tiled_smem((int)P, nb);
    if (warp_sel) {
        const int64_t ctas = d->batch * d->heads * ((d->mq + WS_QT - 1) / WS_QT);
        if (kpl == 2) s = launch_select(select_warp_kernel<2, double, false>, cst, variant, ctas, WS_THREADS, wsm, stream, sa);
        else if (kpl == 4) s = launch_select(select_warp_kernel<4, double, false>, cst, variant, ctas, WS_THREADS, wsm, stream, sa);
        else if (kpl == 8) s = launch_select(select_warp_kernel<8, double, false>, cst, variant, ctas, WS_THREADS, wsm, stream, sa);
        else s = launch_select(select_warp_kernel<16, double, false>, cst, variant, ctas, WS_THREADS, wsm, stream, sa);
        if (s) return s;
    } else if (!(variant & 2) && tsm <= cst->smem_optin) {
        const int64_t ctas = d->batch * d->heads * ((d->mq + SEL_QT - 1) / SEL_QT);
        if ((s = launch_select(select_tiled_kernel, cst, variant, ctas, SEL_THREADS, tsm, stream, sa))) return s;
    } else {
        int smem = (int)(d->nb * 10);
        if (smem > 48 * 1024) {
            cudaError_t e = cudaFuncSetAttribute(select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
            if (e != cudaSuccess) { (void)cudaGetLastError(); return bsk_cuda_status(e); }
        }
        select_kernel<<<(unsigned)nq, 128, smem, stream>>>(sa);
    }
    ctx->last_kernel = "cuda-topk";
    return BSK_CUDA_LAUNCH_CHECK();
}
