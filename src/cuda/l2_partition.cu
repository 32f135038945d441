/* l2_partition.cu — which SMs share an L2 partition, found on the running GPU.

   Why: an H100 / H200 L2 is two partitions joined by a fabric; an SM reads through the partition of its GPC,
   which keeps its own copy of lines homed in the other one. When the SMs of each partition read disjoint data,
   the L2 holds twice as much (bench/results/l2_partition_h100_2026-11-24_s8.txt: 1.97x at 16 MB per half); the
   Hopper SpMM uses that for skewed patterns (a queue per partition, src/cuda/hopper/spmm_kernel.cuh). The
   map is not a formula of %smid: it follows which TPCs a chip has fused off, and differed between two H100s.

   How (no host synchronisation; two small kernels once per context, ~0.3 ms, results read later through
   pinned memory and an event the host polls):
   1. l2p_chase, one CTA per SM (the shared-memory request keeps two apart). The CTA of block 0 (SM r) reads
      every block's 32 KB region, so r's partition caches all of them and the other partition only the lines
      homed there. Then every CTA times a dependent-load chase over its own region: an SM in r's partition hits
      all lines near; an SM in the other partition finds half of them only across the fabric (~+100 cycles).
      A region is chased by one SM only, so no SM's misses warm another's lines.
   2. l2p_classify, one thread: sorts the per-SM latencies, cuts at the widest gap of the middle half, and
      accepts the split only if it is clear (cluster means >= 20 cycles apart, the gap >= 10 cycles and twice any
      other step of the middle half, each side 30-70 % of the SMs, r itself on the near side). Otherwise the
      table stays invalid (all zero) and nothing changes. On an H100 (session 8): near 292-325 cycles per load,
      far 358-419, the split identical to the one ncu's fabric counters give (bench/l2_partition_probe.sh).
      Under compute-sanitizer the timings mean nothing and the split is (rightly) not accepted.
   The table is an optimisation hint only: any table gives correct results. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_internal.h"
#include "hopper/ptx.cuh" /* sm_id() */
#include "hopper/tune.h"  /* the probe hook's declaration */

namespace {

constexpr int L2P_LINES = 256;           /* 128-byte lines per SM region (32 KB) */
constexpr int L2P_SMEM = 120 * 1024;     /* dynamic shared memory: one CTA per SM */
constexpr long long L2P_SPIN = 20000000; /* cycles a CTA waits for block 0 before giving up (~10 ms) */

/* lat[b]: cycles per chased load of block b (-1: it gave up), smid[b]: its SM. zero is 0 at run time: the
   loaded value feeds the next address (a true dependence the compiler cannot remove). */
__global__ void __launch_bounds__(256) l2p_chase(const unsigned *buf, unsigned *flag, float *lat, int *smid,
                                                  unsigned zero)
{
    extern __shared__ unsigned char l2p_pad[];
    const int b = blockIdx.x, n = gridDim.x;
    const unsigned *mine = buf + (size_t)b * L2P_LINES * 32;
    if (b == 0) { /* SM r: every region through its partition */
        unsigned acc = 0;
        for (size_t l = threadIdx.x; l < (size_t)n * L2P_LINES; l += blockDim.x) acc += __ldcg(buf + l * 32);
        if (acc == 0xdeadbeefu) l2p_pad[0] = 1; /* never: keeps the loads */
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicExch(flag, 1u);
        }
    }
    if (threadIdx.x != 0) return;
    const long long t0 = clock64();
    while (atomicAdd(flag, 0u) == 0u)
        if (clock64() - t0 > L2P_SPIN) {
            lat[b] = -1.0f;
            smid[b] = (int)bsk_hopper::sm_id();
            return;
        }
    unsigned idx = 0, v = 0;
    const long long c0 = clock64();
    for (int i = 0; i < L2P_LINES; ++i) {
        v = __ldcg(mine + (size_t)(idx + (v & zero)) * 32);
        idx = (idx * 5u + 7u) & (L2P_LINES - 1); /* full-period walk over the region's lines */
    }
    const long long c1 = clock64();
    lat[b] = (float)(c1 - c0) / L2P_LINES + (float)(v & zero);
    smid[b] = (int)bsk_hopper::sm_id();
}

/* table[0..1023]: partition of each smid (0: r's), table[1024]: 1 when the split is clear. One thread. */
__global__ void l2p_classify(const float *lat, const int *smid, int n, unsigned char *table)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    for (int i = 0; i <= 1024; ++i) table[i] = 0;
    float s[1024];
    if (n < 8 || n > 1024) return;
    for (int i = 0; i < n; ++i) {
        if (lat[i] <= 0.0f || smid[i] < 0 || smid[i] >= 1024) return;
        for (int j = 0; j < i; ++j)
            if (smid[j] == smid[i]) return; /* two blocks on one SM: not one CTA per SM */
        s[i] = lat[i];
    }
    for (int i = 1; i < n; ++i) { /* insertion sort: n is the SM count */
        const float x = s[i];
        int j = i - 1;
        while (j >= 0 && s[j] > x) { s[j + 1] = s[j]; --j; }
        s[j + 1] = x;
    }
    int cut = -1;
    float gap = 0.0f, gap2 = 0.0f; /* the widest and second-widest steps of the middle half */
    for (int i = n / 4; i < 3 * n / 4; ++i) {
        const float g = s[i + 1] - s[i];
        if (g > gap) { gap2 = gap; gap = g; cut = i; }
        else if (g > gap2) gap2 = g;
    }
    if (cut < 0) return;
    const float thr = 0.5f * (s[cut] + s[cut + 1]);
    float lo = 0.0f, hi = 0.0f;
    int nlo = 0;
    for (int i = 0; i < n; ++i) {
        if (s[i] < thr) { lo += s[i]; ++nlo; }
        else hi += s[i];
    }
    lo /= (float)nlo;
    hi /= (float)(n - nlo);
    const bool clear = hi - lo >= 20.0f && gap >= 10.0f && gap >= 2.0f * gap2 && 10 * nlo >= 3 * n &&
                       10 * nlo <= 7 * n && lat[0] < thr;
    if (!clear) return;
    for (int i = 0; i < n; ++i) table[smid[i]] = lat[i] > thr ? 1 : 0;
    table[1024] = 1;
}

} // namespace

/* Enqueue the discovery on `stream` into st's buffers (allocated here); lat / smid scratch after the table. */
static bsk_status l2p_launch(struct bsk_cuda_state *st, cudaStream_t stream)
{
    const int n = st->sms;
    const size_t region = (size_t)L2P_LINES * 128;
    const size_t bytes = 2048 + (size_t)n * (sizeof(float) + sizeof(int)) + 256 + (size_t)n * region;
    bsk_status s = bsk_cuda_status(cudaMalloc((void **)&st->l2p_dev, bytes));
    if (s) return s;
    if ((s = bsk_cuda_status(cudaMallocHost((void **)&st->l2p_host, 16)))) return s;
    if ((s = bsk_cuda_status(cudaEventCreateWithFlags(&st->l2p_ev, cudaEventDisableTiming)))) return s;
    if ((s = bsk_cuda_status(cudaFuncSetAttribute(l2p_chase, cudaFuncAttributeMaxDynamicSharedMemorySize, L2P_SMEM))))
        return s;
    unsigned char *base = st->l2p_dev;
    float *lat = (float *)(base + 2048);
    int *smid = (int *)(lat + n);
    unsigned *flag = (unsigned *)(base + 2048 + (size_t)n * (sizeof(float) + sizeof(int)));
    const unsigned *buf = (const unsigned *)((unsigned char *)flag + 256);
    if ((s = bsk_cuda_status(cudaMemsetAsync(flag, 0, 256, stream)))) return s;
    l2p_chase<<<n, 256, L2P_SMEM, stream>>>(buf, flag, lat, smid, 0u);
    if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
    l2p_classify<<<1, 32, 0, stream>>>(lat, smid, n, base);
    if ((s = BSK_CUDA_LAUNCH_CHECK())) return s;
    if ((s = bsk_cuda_status(cudaMemcpyAsync(st->l2p_host, base + 1024, 1, cudaMemcpyDeviceToHost, stream))))
        return s;
    return bsk_cuda_status(cudaEventRecord(st->l2p_ev, stream));
}

const unsigned char *bsk_cuda_l2_partitions(bsk_context *ctx)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return NULL;
    if (st->l2p_state == 2) return st->l2p_dev;
    if (st->l2p_state == 3) return NULL;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cap) != cudaSuccess || cap != cudaStreamCaptureStatusNone) {
        (void)cudaGetLastError();
        return NULL; /* never start or poll inside a capture */
    }
    if (st->l2p_state == 0) {
        const char *env = getenv("BSK_L2_PARTITIONS");
        if ((env && !strcmp(env, "0")) || st->cc_major != 9 || st->sms < 8 || l2p_launch(st, stream)) {
            (void)cudaGetLastError();
            st->l2p_state = 3;
            return NULL;
        }
        st->l2p_state = 1;
        return NULL; /* not known yet: this call goes without */
    }
    const cudaError_t q = cudaEventQuery(st->l2p_ev); /* state 1: polled, never waited for */
    if (q == cudaErrorNotReady) return NULL;
    (void)cudaGetLastError();
    st->l2p_state = q == cudaSuccess && st->l2p_host[0] == 1 ? 2 : 3;
    return st->l2p_state == 2 ? st->l2p_dev : NULL;
}

void bsk_cuda_l2_partitions_release(struct bsk_cuda_state *st)
{
    if (st->l2p_state == 0) return;
    if (st->l2p_ev) (void)cudaEventSynchronize(st->l2p_ev);
    if (st->l2p_dev) (void)cudaFree(st->l2p_dev);
    if (st->l2p_host) (void)cudaFreeHost(st->l2p_host);
    if (st->l2p_ev) (void)cudaEventDestroy(st->l2p_ev);
    st->l2p_dev = st->l2p_host = NULL;
    st->l2p_ev = NULL;
    st->l2p_state = 0;
}

extern "C" bsk_status bsk__cuda_l2_partition_probe(bsk_context *ctx, unsigned char *table, float *lat, int *smid,
                                                    int *n)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->l2p_state == 0) (void)bsk_cuda_l2_partitions(ctx);
    if (st->l2p_state == 3 && !st->l2p_dev) return BSK_ERR_UNSUPPORTED;
    bsk_status s = bsk_cuda_status(cudaEventSynchronize(st->l2p_ev));
    if (s) return s;
    (void)bsk_cuda_l2_partitions(ctx);
    *n = st->sms;
    if ((s = bsk_cuda_status(cudaMemcpy(table, st->l2p_dev, 1025, cudaMemcpyDeviceToHost)))) return s;
    if ((s = bsk_cuda_status(cudaMemcpy(lat, st->l2p_dev + 2048, sizeof(float) * st->sms, cudaMemcpyDeviceToHost))))
        return s;
    return bsk_cuda_status(cudaMemcpy(smid, st->l2p_dev + 2048 + sizeof(float) * st->sms, sizeof(int) * st->sms,
                                      cudaMemcpyDeviceToHost));
}
