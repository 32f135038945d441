/* cpu_internal.h — what the CPU backend's files share: the register-tile kernel, packing helpers and the
   thread pool. Private to src/cpu/.

   How the CPU backend computes (SpMM and SDDMM alike): every output tile is a small dense GEMM
       acc[h x w] (+)= Apanel[h x kc] · Bpanel[kc x w]
   over a contraction made of whole block slices. Both panels are packed — converted to fp32 once per tile
   (fp16/bf16 are never converted per multiply), zero-padded to the register tile, laid out so the inner loop
   reads them contiguously — and a CPU_MR x CPU_NR register tile accumulates in fp32. Each output element is
   a sum whose order depends only on the pattern and the shapes, never on threads or timing: results are
   bitwise reproducible and independent of the thread count. */
#ifndef BSK_CPU_INTERNAL_H
#define BSK_CPU_INTERNAL_H

#include <string.h>
#include "../internal.h"

#define CPU_MR 4    /* register tile rows: divides the usual block sizes                      */
#define CPU_NR 24   /* register tile columns: 3 AVX vectors; 4x24 accumulators + 3 + 1 = 16 regs */
#ifndef CPU_KC
#define CPU_KC 256  /* contraction elements per packed chunk (the B strip, KC x NR, stays in L1)  */
#endif
#ifndef CPU_NT
#define CPU_NT 192  /* output columns per tile (multiple of CPU_NR); packed B panel KC x NT in L2 */
#endif

static inline int64_t cpu_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* acc (+)= pa · pb for a tile of ms row strips (CPU_MR rows each) x ns column strips (CPU_NR columns each).
   Packed layouts: row strip s at pa + s*CPU_MR*kstride, element (p, r) at [p*CPU_MR + r]; column strip t
   at pb + t*CPU_NR*kstride, element (p, n) at [p*CPU_NR + n]; kc <= kstride. acc is row-major with ldacc.
   first: overwrite acc instead of adding to it (kc may be 0: then acc becomes zero). */
typedef void (*bsk__cpu_tile_fn)(int64_t kc, int64_t kstride, int64_t ms, int64_t ns, const float *pa,
                                 const float *pb, float *acc, int64_t ldacc, int first);
/* The widest kernel this CPU runs: AVX2+FMA on x86-64 when the CPU and OS support it, else portable C.
   Environment BSK_CPU_PORTABLE=1 forces the portable one (read per call: tests cover both). */
bsk__cpu_tile_fn bsk__cpu_pick_tile(void);

/* Element conversions inlined for the packing loops (same results as src/core/convert.c). */
static inline uint32_t cpu_f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float cpu_u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float cpu_h2f(uint16_t h)
{
    /* Branch-free, with masks (the packing loops vectorise): move exponent and mantissa into place and
       rebias; inf/nan get the all-ones exponent; subnormals are built as 2^-14·(1 + m/1024) − 2^-14 =
       m·2^-24, exact, from normal operands only (denormals-are-zero modes cannot change it). */
    uint32_t em = (uint32_t)(h & 0x7fffu) << 13, exp = em & 0x0f800000u;
    uint32_t special = 0u - (uint32_t)(exp == 0x0f800000u), sub = 0u - (uint32_t)(exp == 0);
    uint32_t u = em + (112u << 23) + (special & (112u << 23)) + (sub & (1u << 23));
    uint32_t us = cpu_f2u(cpu_u2f(u) - cpu_u2f(113u << 23));
    return cpu_u2f(((sub & us) | (~sub & u)) | (uint32_t)(h & 0x8000u) << 16);
}
/* fp32 -> fp16, round to nearest even, branch-free (bitwise the same as bsk__float_to_half): overflow to
   inf, NaN to a quiet NaN, subnormals rounded by adding 0.5 (whose ulp is the half subnormal step). */
static inline uint16_t cpu_f2h(float f)
{
    uint32_t u = cpu_f2u(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t big = 0u - (uint32_t)(a >= 0x47800000u), small = 0u - (uint32_t)(a < 0x38800000u);
    uint32_t inf_nan = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
    uint32_t sub = cpu_f2u(cpu_u2f(a) + 0.5f) - 0x3f000000u;
    uint32_t norm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
    uint32_t o = (big & inf_nan) | (~big & ((small & sub) | (~small & norm)));
    return (uint16_t)(o | sign);
}
static inline float cpu_bf2f(uint16_t h) { return cpu_u2f((uint32_t)h << 16); }
/* n elements of src (dtype t) starting at element i, as fp32, into dst. */
static inline void cpu_load_row(float *restrict dst, const void *restrict src, bsk_dtype t, int64_t i, int64_t n)
{
    if (t == BSK_F32) {
        const float *s = (const float *)src + i;
        for (int64_t q = 0; q < n; q++) dst[q] = s[q];
    } else if (t == BSK_F16) {
        const uint16_t *s = (const uint16_t *)src + i;
        for (int64_t q = 0; q < n; q++) dst[q] = cpu_h2f(s[q]);
    } else {
        const uint16_t *s = (const uint16_t *)src + i;
        for (int64_t q = 0; q < n; q++) dst[q] = cpu_bf2f(s[q]);
    }
}
/* fp32 -> bf16, round to nearest even, NaN kept quiet (bitwise the same as bsk__float_to_bf16). */
static inline uint16_t cpu_f2bf(float f)
{
    uint32_t u = cpu_f2u(f), nan = 0u - (uint32_t)((u & 0x7fffffffu) > 0x7f800000u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((nan & ((u >> 16) | 0x40u)) | (~nan & r));
}
/* n fp32 values from src into dst (dtype t) starting at element i. */
static inline void cpu_store_row(void *restrict dst, bsk_dtype t, int64_t i, const float *restrict src, int64_t n)
{
    if (t == BSK_F32) {
        float *d = (float *)dst + i;
        for (int64_t q = 0; q < n; q++) d[q] = src[q];
    } else if (t == BSK_F16) {
        uint16_t *d = (uint16_t *)dst + i;
        for (int64_t q = 0; q < n; q++) d[q] = cpu_f2h(src[q]);
    } else {
        uint16_t *d = (uint16_t *)dst + i;
        for (int64_t q = 0; q < n; q++) d[q] = cpu_f2bf(src[q]);
    }
}
/* One element of src (dtype t) as fp32. */
static inline float cpu_load1(const void *src, bsk_dtype t, int64_t i)
{
    if (t == BSK_F32) return ((const float *)src)[i];
    if (t == BSK_F16) return cpu_h2f(((const uint16_t *)src)[i]);
    return cpu_bf2f(((const uint16_t *)src)[i]);
}

/* Threads for a job of `items` independent work items costing about `flops` in all: BSK_NUM_THREADS when
   set (read on every call, so a program or test may change it between calls), else the online cores; never
   more than items, and 1 (no thread created) for jobs too small to repay starting threads. */
int bsk__cpu_threads(int64_t items, double flops);

/* Run fn(arg, item, ws) for item = 0..items-1 on nthreads threads (the caller's thread is one of them),
   items handed out in order from a shared counter. Each thread gets its own workspace ws of ws_floats
   floats, 64-byte aligned. All workspace is allocated before any item runs: on BSK_ERR_OUT_OF_MEMORY no
   item has run. If the system refuses a thread, the remaining threads do its share. */
typedef void (*bsk__cpu_item_fn)(void *arg, int64_t item, float *ws);
bsk_status bsk__cpu_parallel(int nthreads, int64_t items, bsk__cpu_item_fn fn, void *arg, int64_t ws_floats);

#endif
