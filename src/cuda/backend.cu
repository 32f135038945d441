/* backend.cu — the CUDA backend's glue: device discovery, memory, per-context state, and the dispatch
   that picks a kernel for each call (Hopper first, then the portable tensor-core path, then SIMT). */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "cuda_internal.h"

extern "C" int bsk_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear: no driver / no device is not an error for AUTO */
        return 0;
    }
    return n;
}

extern "C" bsk_status bsk_cuda_pointer_mem(const void *p, bsk_memory *mem)
{
    *mem = BSK_MEM_HOST;
    static int devices = -1;
    if (devices < 0) devices = bsk_cuda_device_count();
    if (!devices || !p) return BSK_SUCCESS;
    cudaPointerAttributes a;
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) { (void)cudaGetLastError(); return BSK_SUCCESS; }
    if (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) *mem = BSK_MEM_DEVICE;
    return BSK_SUCCESS;
}

extern "C" bsk_status bsk_cuda_malloc(void **p, size_t bytes)
{
    if (!bsk_cuda_device_count()) return BSK_ERR_NO_DEVICE;
    return bsk_cuda_status(cudaMalloc(p, bytes ? bytes : 1));
}

extern "C" void bsk_cuda_free(void *p)
{
    if (p) (void)cudaFree(p);
}

extern "C" bsk_status bsk_cuda_memcpy(void *dst, const void *src, size_t bytes, int dst_dev, int src_dev)
{
    if (!bytes) return BSK_SUCCESS;
    if (!dst_dev && !src_dev) { memcpy(dst, src, bytes); return BSK_SUCCESS; }
    return bsk_cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
}

extern "C" bsk_status bsk_cuda_synchronize(bsk_context *ctx)
{
    return bsk_cuda_status(cudaStreamSynchronize((cudaStream_t)ctx->stream));
}

extern "C" bsk_status bsk_cuda_stream_switch(bsk_context *ctx, void *next)
{
    cudaStream_t from = (cudaStream_t)ctx->stream, to = (cudaStream_t)next;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    /* A capturing stream cannot wait on an event recorded outside its capture; the caller orders work
       around a capture themselves (as for any library on a capture stream). */
    if (cudaStreamIsCapturing(to, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone ||
        cudaStreamIsCapturing(from, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return BSK_SUCCESS;
    }
    cudaEvent_t ev;
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, from);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(to, ev, 0);
    (void)cudaEventDestroy(ev);
    return bsk_cuda_status(e);
}

/* Peak DRAM bandwidth from the memory clock and bus width (double data rate: 2 transfers per clock); 0 when not
   reported (or absurd). Read once per context (bsk_cuda_state.dram_gbs); the probe prints it (tune.h). */
extern "C" int bsk__cuda_dram_gbs(int device)
{
    int clk_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clk_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    const double gbs = 2.0 * clk_khz * 1e3 * (bus_bits / 8) / 1e9;
    return gbs > 0 && gbs < 1e6 ? (int)gbs : 0;
}

struct bsk_cuda_state *bsk_cuda_state_get(bsk_context *ctx)
{
    if (ctx->cuda) return ctx->cuda;
    struct bsk_cuda_state *st = (struct bsk_cuda_state *)calloc(1, sizeof *st);
    if (!st) return NULL;
    cudaDeviceProp p;
    if (cudaGetDevice(&st->device) != cudaSuccess || cudaGetDeviceProperties(&p, st->device) != cudaSuccess) {
        free(st);
        return NULL;
    }
    st->cc_major = p.major;
    st->cc_minor = p.minor;
    st->sms = p.multiProcessorCount;
    st->smem_optin = p.sharedMemPerBlockOptin;
    st->dram_gbs = bsk__cuda_dram_gbs(st->device);
    ctx->cuda = st;
    return st;
}

bsk_status bsk_cuda_workspace(bsk_context *ctx, size_t bytes, void **ptr)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->workspace_bytes < bytes) {
        void *p = NULL;
        bsk_status s = bsk_cuda_status(cudaMallocAsync(&p, bytes, (cudaStream_t)ctx->stream));
        if (s) return s;
        if (st->workspace) (void)cudaFreeAsync(st->workspace, (cudaStream_t)ctx->stream);
        st->workspace = p;
        st->workspace_bytes = bytes;
    }
    *ptr = st->workspace;
    return BSK_SUCCESS;
}

bsk_status bsk_cuda_queue(bsk_context *ctx, int slot, unsigned **ptr)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (!st->queues) {
        cudaStreamCaptureStatus cap;
        if (cudaStreamIsCapturing((cudaStream_t)ctx->stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
            (void)cudaGetLastError();
            return BSK_ERR_UNSUPPORTED;
        }
        /* a failure is returned and cleared, so that a caller that takes another path does not meet it at its next
           launch check */
        void *p = NULL;
        bsk_status s = bsk_cuda_status(cudaMallocAsync(&p, 256, (cudaStream_t)ctx->stream));
        if (s) {
            (void)cudaGetLastError();
            return s;
        }
        if ((s = bsk_cuda_status(cudaMemsetAsync(p, 0, 256, (cudaStream_t)ctx->stream)))) {
            (void)cudaFreeAsync(p, (cudaStream_t)ctx->stream);
            (void)cudaGetLastError();
            return s;
        }
        st->queues = (unsigned *)p;
    }
    *ptr = st->queues + slot;
    return BSK_SUCCESS;
}

extern "C" void bsk_cuda_release(bsk_context *ctx)
{
    if (!ctx->cuda) return;
    bsk_cuda_pattern_cache_release(ctx->cuda);
    bsk_cuda_l2_partitions_release(ctx->cuda);
    if (ctx->cuda->workspace) (void)cudaFree(ctx->cuda->workspace);
    if (ctx->cuda->queues) (void)cudaFree(ctx->cuda->queues);
    free(ctx->cuda);
    ctx->cuda = NULL;
}

extern "C" void bsk_cuda_forget_patterns(bsk_context *ctx)
{
    if (ctx->cuda) bsk_cuda_pattern_cache_release(ctx->cuda);
}

extern "C" const char *bsk_cuda_arch_list(void)
{
#ifdef BSK_ARCH_LIST
    return BSK_ARCH_LIST;
#else
    return "unknown";
#endif
}

extern "C" bsk_status bsk_cuda_device_query(bsk_device_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->arch_list, sizeof info->arch_list, "%s", bsk_cuda_arch_list());
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    if (!bsk_cuda_device_count()) return BSK_ERR_NO_DEVICE;
    int dev = 0;
    cudaDeviceProp p;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return BSK_ERR_CUDA;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->multiprocessors = p.multiProcessorCount;
    info->global_mem_bytes = (int64_t)p.totalGlobalMem;
    info->l2_bytes = p.l2CacheSize;
    return BSK_SUCCESS;
}

/* Try each kernel family in order of speed; the first that takes the case runs it. */
static bsk_status spmm_default(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                               float beta, bsk_dense *C)
{
    bsk_status s = bsk_hopper_spmm(ctx, op, alpha, A, B, beta, C);
    if (s != BSK_ERR_UNSUPPORTED) return s;
    s = bsk_hopper_spmm_small(ctx, op, alpha, A, B, beta, C);
    if (s != BSK_ERR_UNSUPPORTED) return s;
    s = bsk_portable_spmm(ctx, op, alpha, A, B, beta, C);
    if (s != BSK_ERR_UNSUPPORTED) return s;
    return bsk_simt_spmm(ctx, op, alpha, A, B, beta, C);
}

/* One family, as the tuner chose it: it takes every case it can do exactly (ctx->spmm_forced: the small-block
   kernel then ignores its density crossover); UNSUPPORTED when it cannot. */
static bsk_status spmm_family(bsk_context *ctx, int fam, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                              float beta, bsk_dense *C)
{
    bsk_status s = BSK_ERR_UNSUPPORTED;
    ctx->spmm_forced = 1;
    if (fam == BSK__FAM_HOPPER) s = bsk_hopper_spmm(ctx, op, alpha, A, B, beta, C);
    else if (fam == BSK__FAM_HOPPER_SMALL) s = bsk_hopper_spmm_small(ctx, op, alpha, A, B, beta, C);
    else if (fam == BSK__FAM_PORTABLE) s = bsk_portable_spmm(ctx, op, alpha, A, B, beta, C);
    else if (fam == BSK__FAM_SIMT) s = bsk_simt_spmm(ctx, op, alpha, A, B, beta, C);
    ctx->spmm_forced = 0;
    return s;
}

extern "C" bsk_status bsk_cuda_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                    float beta, bsk_dense *C)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    const int fam = bsk__tune_lookup(ctx, op, A, B, beta, C); /* the autotuner's pick for this case's class, if any */
    if (fam != BSK__FAM_NONE) {
        bsk_status s = spmm_family(ctx, fam, op, alpha, A, B, beta, C);
        if (s != BSK_ERR_UNSUPPORTED) return s;
    }
    return spmm_default(ctx, op, alpha, A, B, beta, C);
}

/* The autotuner's timing (bsk_tune_spmm, src/core/tune.c): the default dispatch (slot 0) and every family on a
   scratch copy of C — one warm-up run each, then `iters` rounds in which every family runs once between two events,
   in an order shuffled per round, each run after an L2 flush (a memset of twice the L2 size, skipped when that
   scratch cannot be had) — median per family — then the fastest family once on C itself, so C ends as one bsk_spmm
   call leaves it. Why: timed one after another, the same kernel read 0.9–1.4x between slots (clocks); round-robin
   in a fixed order, the family run right after the default (the same kernel on warm L2 lines) read up to 1.26x
   faster than the default itself (H100, session 7). */
static bsk_status tune_run(bsk_context *ctx, int f, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                           float beta, bsk_dense *C)
{
    return f ? spmm_family(ctx, f, op, alpha, A, B, beta, C) : spmm_default(ctx, op, alpha, A, B, beta, C);
}

extern "C" bsk_status bsk_cuda_tune_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                                         float beta, bsk_dense *C, int iters, int *best, bsk_tune_result *r)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    const size_t bytes = (size_t)C->rows * (size_t)C->ld * bsk_dtype_size(C->dtype);
    bsk_dense S = *C;
    float *v = (float *)malloc(sizeof(float) * (size_t)iters * BSK__FAM_COUNT); /* v[f * iters + round] */
    cudaEvent_t e0 = NULL, e1 = NULL;
    bsk_status s = v ? BSK_SUCCESS : BSK_ERR_OUT_OF_MEMORY;
    if (!s && (cudaMalloc(&S.data, bytes ? bytes : 1) != cudaSuccess)) {
        (void)cudaGetLastError();
        S.data = NULL;
        s = BSK_ERR_OUT_OF_MEMORY;
    }
    if (!s && (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess ||
               cudaMemcpyAsync(S.data, C->data, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess))
        s = BSK_ERR_CUDA;
    void *flush = NULL; /* L2 scrub buffer */
    size_t flush_bytes = 0;
    {
        int dev = 0, l2 = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) == cudaSuccess &&
            l2 > 0) {
            flush_bytes = 2 * (size_t)l2;
            if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {
                (void)cudaGetLastError();
                flush = NULL;
            }
        }
        (void)cudaGetLastError();
    }
    double ms[BSK__FAM_COUNT];
    const char *names[BSK__FAM_COUNT] = {NULL, NULL, NULL, NULL, NULL};
    for (int f = 0; f < BSK__FAM_COUNT && !s; f++) { /* warm-up; finds the families that take the case */
        ms[f] = INFINITY;
        bsk_status t = tune_run(ctx, f, op, alpha, A, B, beta, &S);
        if (t == BSK_ERR_UNSUPPORTED && f) continue;
        if ((s = t)) break;
        names[f] = ctx->last_kernel;
    }
    uint32_t rng = 0x9e3779b9u;
    for (int i = 0; i < iters && !s; i++) {
        int order[BSK__FAM_COUNT];
        for (int j = 0; j < BSK__FAM_COUNT; j++) order[j] = j;
        for (int j = BSK__FAM_COUNT - 1; j > 0; j--) { /* Fisher-Yates, a fixed LCG: runs are repeatable */
            rng = rng * 1664525u + 1013904223u;
            const int k = (int)((rng >> 8) % (uint32_t)(j + 1)), x = order[j];
            order[j] = order[k];
            order[k] = x;
        }
        for (int j = 0; j < BSK__FAM_COUNT && !s; j++) {
            const int f = order[j];
            if (!names[f]) continue;
            if (flush && cudaMemsetAsync(flush, i + j, flush_bytes, stream) != cudaSuccess) { s = BSK_ERR_CUDA; break; }
            if (cudaEventRecord(e0, stream) != cudaSuccess) { s = BSK_ERR_CUDA; break; }
            s = tune_run(ctx, f, op, alpha, A, B, beta, &S);
            if (!s && (cudaEventRecord(e1, stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                       cudaEventElapsedTime(&v[f * iters + i], e0, e1) != cudaSuccess))
                s = BSK_ERR_CUDA;
        }
    }
    for (int f = 0; f < BSK__FAM_COUNT && !s; f++) {
        if (!names[f]) continue;
        float *w = v + f * iters;
        for (int i = 1; i < iters; i++) /* insertion sort: iters <= 1000 */
            for (int j = i; j > 0 && w[j] < w[j - 1]; j--) { float x = w[j]; w[j] = w[j - 1]; w[j - 1] = x; }
        ms[f] = iters % 2 ? w[iters / 2] : 0.5 * ((double)w[iters / 2 - 1] + (double)w[iters / 2]);
    }
    /* the fastest family; the default's own family unless another beats it by more than 2 % (run-to-run noise:
       a same-kernel pair reads 0.98-1.04x in one run), so a table only moves cases that clearly gain */
    int win = BSK__FAM_NONE, dflt = BSK__FAM_NONE;
    for (int f = 1; f < BSK__FAM_COUNT && !s; f++) {
        if (!names[f]) continue;
        if (dflt == BSK__FAM_NONE && names[0] && strcmp(names[f], names[0]) == 0) dflt = f;
        if (win == BSK__FAM_NONE || ms[f] < ms[win]) win = f;
    }
    if (dflt != BSK__FAM_NONE && win != dflt && !(ms[win] < 0.98 * ms[dflt])) win = dflt;
    if (!s && win == BSK__FAM_NONE) s = BSK_ERR_INTERNAL; /* the default ran, so some family must have */
    if (!s) s = spmm_family(ctx, win, op, alpha, A, B, beta, C);
    if (!s) {
        *best = win;
        snprintf(r->kernel, sizeof r->kernel, "%s", names[win]);
        r->ms = ms[win];
        snprintf(r->default_kernel, sizeof r->default_kernel, "%s", names[0]);
        r->default_ms = ms[0];
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (S.data) cudaFree(S.data);
    if (flush) cudaFree(flush);
    free(v);
    if (s == BSK_ERR_CUDA) (void)cudaGetLastError();
    return s;
}

extern "C" bsk_status bsk_cuda_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y,
                                     float beta, bsk_bsr *out)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    bsk_status s = bsk_hopper_sddmm(ctx, alpha, X, Y, beta, out);
    if (s != BSK_ERR_UNSUPPORTED) return s;
    s = bsk_portable_sddmm(ctx, alpha, X, Y, beta, out);
    if (s != BSK_ERR_UNSUPPORTED) return s;
    return bsk_simt_sddmm(ctx, alpha, X, Y, beta, out);
}
