/* probe_util.h — what the device probes (bench/small_probe.c; bench/hopper_probe.c has the same helpers inline and
   can include this instead) share: error-checking macros for CUDA / cuBLAS / bsk calls (exit on failure: probes
   only, never the library), a median, the L2-flushed event timing, a seeded random stream, and fp16 / bf16 <-> float conversions done on the
   host (round to nearest even). Header-only: each probe is one translation unit. */
#ifndef BSK_BENCH_PROBE_UTIL_H
#define BSK_BENCH_PROBE_UTIL_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include "bsk.h"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)
#define CB(x)                                                                           \
    do {                                                                                \
        cublasStatus_t e_ = (x);                                                        \
        if (e_ != CUBLAS_STATUS_SUCCESS) {                                              \
            fprintf(stderr, "%s:%d: %s: cublas %d\n", __FILE__, __LINE__, #x, (int)e_); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)
#define CS(x)                                                                                   \
    do {                                                                                        \
        bsk_status e_ = (x);                                                                    \
        if (e_ != BSK_SUCCESS) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, bsk_status_string(e_)); \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static inline int probe_cmpf(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
/* median of n timings (sorts them) */
static inline double probe_median(float *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], probe_cmpf);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static uint64_t probe_rng_state = 0x1234567ull;
/* median ms of `iters` timed calls of f(arg) (CUDA events on the default stream), each after `flush_bytes` of memset
   over `flush` (outside the events: L2 cold), after 3 untimed warm-up calls; the fastest in *mn unless NULL */
typedef void (*probe_fn)(void *);
static inline double probe_time(probe_fn f, void *arg, int iters, void *flush, size_t flush_bytes, cudaEvent_t e0,
                                cudaEvent_t e1, double *mn)
{
    float t[256];
    if (iters > 256) iters = 256;
    for (int i = 0; i < 3; i++) f(arg);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < iters; i++) {
        CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, 0));
        CK(cudaEventRecord(e0, 0));
        f(arg);
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&t[i], e0, e1));
    }
    const double med = probe_median(t, iters); /* sorts t */
    if (mn) *mn = t[0];
    return med;
}

/* What every probe sets up: the L2-flush buffer, the two timing events, a cuBLAS handle, a CUDA context. */
static inline void probe_setup(void **flush, size_t flush_bytes, cudaEvent_t *e0, cudaEvent_t *e1, cublasHandle_t *h,
                               bsk_context **ctx)
{
    CK(cudaMalloc(flush, flush_bytes));
    CK(cudaEventCreate(e0));
    CK(cudaEventCreate(e1));
    CB(cublasCreate(h));
    CS(bsk_create(ctx, BSK_BACKEND_CUDA));
}

/* cuBLAS dense baseline: row-major C (m x n, type ct) = A (m x k) · B (k x n), both of type dt, fp32 accumulation
   (column-major Cᵀ = Bᵀ·Aᵀ) */
typedef struct {
    cublasHandle_t h;
    int64_t m, n, k;
    cudaDataType dt, ct;
    void *A, *B, *C;
} probe_gemm_arg;
static inline void probe_run_gemm(void *p)
{
    const probe_gemm_arg *g = (const probe_gemm_arg *)p;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &one, g->B, g->dt, (int)g->n, g->A,
                    g->dt, (int)g->k, &zero, g->C, g->ct, (int)g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* C = A·B (op N, alpha 1, beta 0) through the public API: the timed call of a probe */
typedef struct {
    bsk_context *ctx;
    bsk_bsr *A;
    bsk_dense *B, *C;
} probe_spmm_arg;
static inline void probe_run_spmm(void *p)
{
    probe_spmm_arg *s = (probe_spmm_arg *)p;
    CS(bsk_spmm(s->ctx, BSK_OP_N, 1.0f, s->A, s->B, 0.0f, s->C));
}

/* A counter build's figures (-DBSK_*_PROF): a zeroed device buffer of 1024 CTAs x 16 64-bit counters goes into the
   knob `*buf` for one call of f(arg) (then NULL again); sum[i] = counter i summed over the CTAs. */
/* mx (or NULL): each counter's largest value over the CTAs; span (or NULL): the largest h[ia] + h[ib] of one CTA */
static inline void probe_counter_sums(probe_fn f, void *arg, void **buf, double sum[16], double mx[16], int ia, int ib,
                                      double *span)
{
    const int n = 16 * 1024;
    long long *d, *h = (long long *)calloc(n, sizeof *h);
    if (!h) exit(1);
    CK(cudaMalloc((void **)&d, n * sizeof *d));
    CK(cudaMemset(d, 0, n * sizeof *d));
    *buf = d;
    f(arg);
    CK(cudaDeviceSynchronize());
    *buf = NULL;
    CK(cudaMemcpy(h, d, n * sizeof *d, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++) sum[i] = 0.0;
    if (mx)
        for (int i = 0; i < 16; i++) mx[i] = 0.0;
    if (span) *span = 0.0;
    for (int b = 0; b < 1024; b++) {
        for (int i = 0; i < 16; i++) {
            sum[i] += (double)h[16 * b + i];
            if (mx && (double)h[16 * b + i] > mx[i]) mx[i] = (double)h[16 * b + i];
        }
        if (span && (double)(h[16 * b + ia] + h[16 * b + ib]) > *span) *span = (double)(h[16 * b + ia] + h[16 * b + ib]);
    }
    CK(cudaFree(d));
    free(h);
}

static inline uint64_t probe_rnext(void) /* splitmix64 */
{
    uint64_t z = (probe_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline uint16_t probe_f2h(float f) /* finite |f| <= 1 */
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const int e = (int)((x >> 23) & 0xff) - 127 + 15;
    uint32_t m = x & 0x7fffffu;
    if (e <= 0) {
        if (e < -10) return (uint16_t)sign;
        m |= 0x800000u;
        const uint32_t sh = (uint32_t)(14 - e), rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
        uint32_t hm = m >> sh;
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);
    }
    const uint32_t hm = m >> 13, rem = m & 0x1fffu;
    uint32_t h = sign | ((uint32_t)e << 10) | hm;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1))) h++;
    return (uint16_t)h;
}
static inline uint16_t probe_f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
static inline float probe_h2f(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        if (!m) x = s;
        else {
            e = 127 - 15 + 1;
            while (!(m & 0x400)) { m <<= 1; e--; }
            x = s | (e << 23) | ((m & 0x3ff) << 13);
        }
    } else if (e == 31) x = s | 0x7f800000u | (m << 13);
    else x = s | ((e + 127 - 15) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline float probe_bf2f(uint16_t h)
{
    const uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
/* uniform values in [-1, 1), fp16 (bf = 0) or bf16 */
static inline void probe_fill_rand16(uint16_t *p, size_t n, int bf)
{
    for (size_t i = 0; i < n; i++) {
        const float v = (float)((double)(probe_rnext() >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
        p[i] = bf ? probe_f2bf(v) : probe_f2h(v);
    }
}
#endif
