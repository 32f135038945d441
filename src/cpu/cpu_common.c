/* cpu_common.c — the CPU backend's register-tile kernels and its small thread pool.
   The kernel comes in two builds of the same algorithm: portable C (GCC/Clang vector extensions, which the
   compiler lowers to whatever SIMD the target has; plain loops for other compilers) and, on x86-64, an
   AVX2+FMA version compiled for that target alone and chosen at run time only when the CPU (and OS) support
   it — so the library still runs on any x86-64. Both sum each output element in the same order
   (p = 0..kc-1); they may differ in the last bit (FMA rounds once), but a given machine always uses the
   same one. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include "cpu_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_HAVE_AVX2_PATH 1
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------- portable kernel */

#if defined(__GNUC__) || defined(__clang__)
/* 16-byte vectors: native width of every SIMD baseline (SSE2, NEON, ...). The 4 x 24 register tile is done
   as two 4 x 12 halves — 12 accumulators + 3 B + 1 broadcast fit 16 registers. */
typedef float cpu_v4 __attribute__((vector_size(16)));
/* macros, not functions: keeps every value in registers, whatever the ABI */
#define V4_LOAD(v, p) memcpy(&(v), (p), sizeof(cpu_v4))
#define V4_STORE(p, v) memcpy((p), &(v), sizeof(cpu_v4))

static void tile_portable(int64_t kc, int64_t kstride, int64_t ms, int64_t ns, const float *pa, const float *pb,
                          float *acc, int64_t ldacc, int first)
{
    for (int64_t t = 0; t < 2 * ns; t++) {
        const float *b = pb + (t / 2) * CPU_NR * kstride + (t % 2) * 12;
        for (int64_t s = 0; s < ms; s++) {
            const float *a = pa + s * CPU_MR * kstride;
            float *c = acc + s * CPU_MR * ldacc + (t / 2) * CPU_NR + (t % 2) * 12;
            cpu_v4 c00, c01, c02, c10, c11, c12, c20, c21, c22, c30, c31, c32;
            if (first) {
                c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = c30 = c31 = c32 = (cpu_v4){0, 0, 0, 0};
            } else {
                V4_LOAD(c00, c + 0 * ldacc), V4_LOAD(c01, c + 0 * ldacc + 4), V4_LOAD(c02, c + 0 * ldacc + 8);
                V4_LOAD(c10, c + 1 * ldacc), V4_LOAD(c11, c + 1 * ldacc + 4), V4_LOAD(c12, c + 1 * ldacc + 8);
                V4_LOAD(c20, c + 2 * ldacc), V4_LOAD(c21, c + 2 * ldacc + 4), V4_LOAD(c22, c + 2 * ldacc + 8);
                V4_LOAD(c30, c + 3 * ldacc), V4_LOAD(c31, c + 3 * ldacc + 4), V4_LOAD(c32, c + 3 * ldacc + 8);
            }
            for (int64_t p = 0; p < kc; p++) {
                cpu_v4 b0, b1, b2, av;
                V4_LOAD(b0, b + p * CPU_NR), V4_LOAD(b1, b + p * CPU_NR + 4), V4_LOAD(b2, b + p * CPU_NR + 8);
                const float *ap = a + p * CPU_MR;
                av = (cpu_v4){ap[0], ap[0], ap[0], ap[0]};
                c00 += av * b0; c01 += av * b1; c02 += av * b2;
                av = (cpu_v4){ap[1], ap[1], ap[1], ap[1]};
                c10 += av * b0; c11 += av * b1; c12 += av * b2;
                av = (cpu_v4){ap[2], ap[2], ap[2], ap[2]};
                c20 += av * b0; c21 += av * b1; c22 += av * b2;
                av = (cpu_v4){ap[3], ap[3], ap[3], ap[3]};
                c30 += av * b0; c31 += av * b1; c32 += av * b2;
            }
            V4_STORE(c + 0 * ldacc, c00), V4_STORE(c + 0 * ldacc + 4, c01), V4_STORE(c + 0 * ldacc + 8, c02);
            V4_STORE(c + 1 * ldacc, c10), V4_STORE(c + 1 * ldacc + 4, c11), V4_STORE(c + 1 * ldacc + 8, c12);
            V4_STORE(c + 2 * ldacc, c20), V4_STORE(c + 2 * ldacc + 4, c21), V4_STORE(c + 2 * ldacc + 8, c22);
            V4_STORE(c + 3 * ldacc, c30), V4_STORE(c + 3 * ldacc + 4, c31), V4_STORE(c + 3 * ldacc + 8, c32);
        }
    }
}
#else
static void tile_portable(int64_t kc, int64_t kstride, int64_t ms, int64_t ns, const float *pa, const float *pb,
                          float *acc, int64_t ldacc, int first)
{
    for (int64_t t = 0; t < ns; t++)
        for (int64_t s = 0; s < ms; s++) {
            const float *a = pa + s * CPU_MR * kstride, *b = pb + t * CPU_NR * kstride;
            float cc[CPU_MR][CPU_NR];
            for (int r = 0; r < CPU_MR; r++)
                for (int n = 0; n < CPU_NR; n++) cc[r][n] = first ? 0.0f : acc[(s * CPU_MR + r) * ldacc + t * CPU_NR + n];
            for (int64_t p = 0; p < kc; p++)
                for (int r = 0; r < CPU_MR; r++)
                    for (int n = 0; n < CPU_NR; n++) cc[r][n] += a[p * CPU_MR + r] * b[p * CPU_NR + n];
            for (int r = 0; r < CPU_MR; r++)
                for (int n = 0; n < CPU_NR; n++) acc[(s * CPU_MR + r) * ldacc + t * CPU_NR + n] = cc[r][n];
        }
}
#endif

/* ---------------------------------------------------------------- x86-64 AVX2 + FMA kernel */

#ifdef CPU_HAVE_AVX2_PATH
__attribute__((target("avx2,fma"))) static void tile_avx2(int64_t kc, int64_t kstride, int64_t ms, int64_t ns,
                                                          const float *pa, const float *pb, float *acc,
                                                          int64_t ldacc, int first)
{
    for (int64_t t = 0; t < ns; t++) {
        const float *b = pb + t * CPU_NR * kstride;
        for (int64_t s = 0; s < ms; s++) {
            const float *a = pa + s * CPU_MR * kstride;
            float *c = acc + s * CPU_MR * ldacc + t * CPU_NR;
            __m256 c00, c01, c02, c10, c11, c12, c20, c21, c22, c30, c31, c32;
            if (first) {
                c00 = c01 = c02 = c10 = c11 = c12 = c20 = c21 = c22 = c30 = c31 = c32 = _mm256_setzero_ps();
            } else {
                c00 = _mm256_loadu_ps(c + 0 * ldacc), c01 = _mm256_loadu_ps(c + 0 * ldacc + 8);
                c02 = _mm256_loadu_ps(c + 0 * ldacc + 16), c10 = _mm256_loadu_ps(c + 1 * ldacc);
                c11 = _mm256_loadu_ps(c + 1 * ldacc + 8), c12 = _mm256_loadu_ps(c + 1 * ldacc + 16);
                c20 = _mm256_loadu_ps(c + 2 * ldacc), c21 = _mm256_loadu_ps(c + 2 * ldacc + 8);
                c22 = _mm256_loadu_ps(c + 2 * ldacc + 16), c30 = _mm256_loadu_ps(c + 3 * ldacc);
                c31 = _mm256_loadu_ps(c + 3 * ldacc + 8), c32 = _mm256_loadu_ps(c + 3 * ldacc + 16);
            }
            for (int64_t p = 0; p < kc; p++) {
                const float *bp = b + p * CPU_NR, *ap = a + p * CPU_MR;
                __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), b2 = _mm256_loadu_ps(bp + 16);
                __m256 av = _mm256_broadcast_ss(ap + 0);
                c00 = _mm256_fmadd_ps(av, b0, c00), c01 = _mm256_fmadd_ps(av, b1, c01), c02 = _mm256_fmadd_ps(av, b2, c02);
                av = _mm256_broadcast_ss(ap + 1);
                c10 = _mm256_fmadd_ps(av, b0, c10), c11 = _mm256_fmadd_ps(av, b1, c11), c12 = _mm256_fmadd_ps(av, b2, c12);
                av = _mm256_broadcast_ss(ap + 2);
                c20 = _mm256_fmadd_ps(av, b0, c20), c21 = _mm256_fmadd_ps(av, b1, c21), c22 = _mm256_fmadd_ps(av, b2, c22);
                av = _mm256_broadcast_ss(ap + 3);
                c30 = _mm256_fmadd_ps(av, b0, c30), c31 = _mm256_fmadd_ps(av, b1, c31), c32 = _mm256_fmadd_ps(av, b2, c32);
            }
            _mm256_storeu_ps(c + 0 * ldacc, c00), _mm256_storeu_ps(c + 0 * ldacc + 8, c01);
            _mm256_storeu_ps(c + 0 * ldacc + 16, c02), _mm256_storeu_ps(c + 1 * ldacc, c10);
            _mm256_storeu_ps(c + 1 * ldacc + 8, c11), _mm256_storeu_ps(c + 1 * ldacc + 16, c12);
            _mm256_storeu_ps(c + 2 * ldacc, c20), _mm256_storeu_ps(c + 2 * ldacc + 8, c21);
            _mm256_storeu_ps(c + 2 * ldacc + 16, c22), _mm256_storeu_ps(c + 3 * ldacc, c30);
            _mm256_storeu_ps(c + 3 * ldacc + 8, c31), _mm256_storeu_ps(c + 3 * ldacc + 16, c32);
        }
    }
}

static int cpu_has_avx2_fma(void)
{
    /* BSK_CPU_PORTABLE=1 forces the portable kernel (lets tests cover it on AVX2 machines). */
    const char *e = getenv("BSK_CPU_PORTABLE");
    if (e && *e && *e != '0') return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

bsk__cpu_tile_fn bsk__cpu_pick_tile(void)
{
#ifdef CPU_HAVE_AVX2_PATH
    if (cpu_has_avx2_fma()) return tile_avx2;
#endif
    return tile_portable;
}

/* ---------------------------------------------------------------- threads */

/* Below this many flops a job runs on the calling thread: starting a thread costs tens of microseconds. */
#define CPU_MIN_FLOPS_PER_THREAD 4.0e6

int bsk__cpu_threads(int64_t items, double flops)
{
    if (items <= 1) return 1;
    long want = 0;
    const char *e = getenv("BSK_NUM_THREADS");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0' && v > 0) want = v > 1024 ? 1024 : v; /* explicit: honoured even for small jobs */
    }
    if (!want) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        want = cores > 0 ? cores : 1;
        if (want > 1024) want = 1024;
        double cap = flops / CPU_MIN_FLOPS_PER_THREAD;
        if (cap < (double)want) want = cap < 1.0 ? 1 : (long)cap;
    }
    return (int)(want < items ? want : items);
}

typedef struct {
    atomic_llong next;
    int64_t items;
    bsk__cpu_item_fn fn;
    void *arg;
} cpu_job;

typedef struct {
    cpu_job *job;
    float *ws;
} cpu_worker;

static void *worker_main(void *p)
{
    cpu_worker *w = (cpu_worker *)p;
    cpu_job *job = w->job;
    for (;;) {
        int64_t it = (int64_t)atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed);
        if (it >= job->items) break;
        job->fn(job->arg, it, w->ws);
    }
    return NULL;
}

bsk_status bsk__cpu_parallel(int nthreads, int64_t items, bsk__cpu_item_fn fn, void *arg, int64_t ws_floats)
{
    if (items <= 0) return BSK_SUCCESS;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > items) nthreads = (int)items;
    size_t ws_bytes = (size_t)cpu_round_up(ws_floats > 0 ? ws_floats : 1, 16) * sizeof(float);
    cpu_worker *w = (cpu_worker *)calloc((size_t)nthreads, sizeof *w);
    pthread_t *tid = (pthread_t *)calloc((size_t)nthreads, sizeof *tid);
    char *started = (char *)calloc((size_t)nthreads, 1);
    int ok = w && tid && started;
    for (int i = 0; ok && i < nthreads; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, ws_bytes)) ok = 0;
        else w[i].ws = (float *)p;
    }
    if (!ok) {
        if (w) for (int i = 0; i < nthreads; i++) free(w[i].ws);
        free(w); free(tid); free(started);
        return BSK_ERR_OUT_OF_MEMORY;
    }
    cpu_job job;
    atomic_init(&job.next, 0);
    job.items = items; job.fn = fn; job.arg = arg;
    for (int i = 0; i < nthreads; i++) w[i].job = &job;
    for (int i = 1; i < nthreads; i++) started[i] = pthread_create(&tid[i], NULL, worker_main, &w[i]) == 0;
    worker_main(&w[0]);
    for (int i = 1; i < nthreads; i++)
        if (started[i]) pthread_join(tid[i], NULL);
    for (int i = 0; i < nthreads; i++) free(w[i].ws);
    free(w); free(tid); free(started);
    return BSK_SUCCESS;
}
