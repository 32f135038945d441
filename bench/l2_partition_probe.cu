/* l2_partition_probe.cu — session 8: is it worth keeping each L2 partition's SMs on their own data?

   Why: ncu on the b128 SpMM (bench/results/hopper_s8_mc_ncu.txt) shows the L2 fabric between the two L2
   partitions of an H100 (lts__ltcfabric2ltc_cycles_active) at 77-89 % of its peak — the busiest L2 unit at
   density 0.1 — while every SM reads every B panel. A line homed in the far partition crosses the fabric once
   per partition that reads it (and again after each eviction). If the SMs of one partition took only their
   own N tiles, each B line would be wanted by one partition only.

   Two steps, one device run (bench/l2_partition_probe.sh drives them):
   --discover  (run under ncu, metric lts__t_sectors_srcunit_ltcfabric.sum): one CTA per SM; only the CTAs on
               SM 0 and SM s read the same 8 MB twice, for every s. Same partition as SM 0: the far half of the
               buffer crosses once (~0.5 x 8 MB of fabric sectors); other partition: each partition fetches its
               far half (~1.0 x 8 MB). The script turns the figures into a table smid -> 0/1.
   --time FILE  one CTA per SM reads buffer X[part] (S MB, 3 passes, 16-byte L2-only loads), part = the table's
               partition of its SM ("aligned"), or the same table shuffled across SMs ("shuffled": as many SMs
               per buffer, partition-blind). L2 flushed before each run, CUDA events, median of 15. If aligned
               is clearly faster at SpMM-like working sets, a partition-aware tile order is worth building.
   Standalone: nvcc -O2 -gencode arch=compute_90a,code=sm_90a bench/l2_partition_probe.cu -o l2p */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/cuda/hopper/ptx.cuh" /* sm_id(): one wrapper per PTX instruction */

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                        \
            return 1;                                                                                          \
        }                                                                                                      \
    } while (0)

/* Every CTA: its SM's entry in sel picks the buffer (0 / 1), or 255 = stay idle. Reads n16 16-byte words of the
   chosen buffer `passes` times, starting at a per-CTA offset, through L2 only (ld.global.cg). */
__global__ void k_read(const int4 *X0, const int4 *X1, const unsigned char *sel, size_t n16, int passes,
                       unsigned *smid_out, unsigned long long *sink)
{
    extern __shared__ int4 pad[]; /* the large dynamic allocation keeps one CTA per SM */
    const unsigned sm = bsk_hopper::sm_id();
    if (threadIdx.x == 0) smid_out[blockIdx.x] = sm;
    const unsigned char p = sel[sm];
    if (p == 255) return;
    const int4 *X = p ? X1 : X0;
    const size_t start = ((size_t)blockIdx.x * 7919u * 64u) % n16;
    int acc = 0;
    for (int ps = 0; ps < passes; ++ps)
        for (size_t i = threadIdx.x; i < n16; i += blockDim.x) {
            size_t j = start + i;
            if (j >= n16) j -= n16;
            const int4 v = __ldcg(X + j);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    if (acc == 0x7fffffff) pad[0].x = acc; /* never: keeps the loads */
    if (acc == 0x12345678) sink[blockIdx.x] = (unsigned long long)acc;
}

static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    const int nsm = pr.multiProcessorCount;
    const int smem = 160 * 1024, threads = 512;
    CK(cudaFuncSetAttribute(k_read, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const size_t maxb = 64ull << 20;
    int4 *X0, *X1;
    unsigned char *dsel, *flush;
    unsigned *dsm;
    unsigned long long *sink;
    CK(cudaMalloc((void **)&X0, maxb));
    CK(cudaMalloc((void **)&X1, maxb));
    CK(cudaMemset(X0, 1, maxb));
    CK(cudaMemset(X1, 2, maxb));
    CK(cudaMalloc((void **)&dsel, 1024));
    CK(cudaMalloc((void **)&dsm, 4 * nsm));
    CK(cudaMalloc((void **)&sink, 8 * nsm));
    const size_t flush_b = 4ull * pr.l2CacheSize;
    CK(cudaMalloc((void **)&flush, flush_b));
    unsigned char sel[1024];
    unsigned hsm[1024];

    /* which smids exist (they need not be 0 .. nsm-1): one launch with every CTA idle after recording its SM */
    memset(sel, 255, sizeof sel);
    CK(cudaMemcpy(dsel, sel, sizeof sel, cudaMemcpyHostToDevice));
    k_read<<<nsm, threads, smem>>>(X0, X1, dsel, 16, 1, dsm, sink);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(hsm, dsm, 4 * nsm, cudaMemcpyDeviceToHost));
    for (int i = 0; i < nsm; ++i) {
        if (hsm[i] >= 1024) { fprintf(stderr, "smid %u out of range\n", hsm[i]); return 1; }
        for (int j = i + 1; j < nsm; ++j)
            if (hsm[i] == hsm[j]) { fprintf(stderr, "two CTAs on SM %u: not one CTA per SM\n", hsm[i]); return 1; }
    }
    if (argc > 1 && !strcmp(argv[1], "--discover")) {
        /* launch 0 recorded the smids; launch 1 + i: SMs hsm[0] and hsm[i] read 8 MB twice (ncu IDs follow) */
        const size_t n16 = (8ull << 20) / 16;
        printf("order:");
        for (int i = 0; i < nsm; ++i) printf(" %u", hsm[i]);
        printf("\n");
        for (int i = 0; i < nsm; ++i) {
            memset(sel, 255, sizeof sel);
            sel[hsm[0]] = 0;
            sel[hsm[i]] = 0;
            CK(cudaMemcpy(dsel, sel, sizeof sel, cudaMemcpyHostToDevice));
            k_read<<<nsm, threads, smem>>>(X0, X1, dsel, n16, 2, dsm, sink);
            CK(cudaDeviceSynchronize());
        }
        printf("discover: %d launches\n", nsm);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[1], "--time")) {
        FILE *f = fopen(argv[2], "r");
        if (!f) { fprintf(stderr, "no table %s\n", argv[2]); return 1; }
        unsigned char tab[1024], shuf[1024];
        memset(tab, 255, sizeof tab);
        int n = 0, sm, v, c1 = 0;
        while (fscanf(f, "%d %d", &sm, &v) == 2 && sm >= 0 && sm < 1024) { tab[sm] = (unsigned char)(v != 0); ++n; }
        fclose(f);
        for (int i = 0; i < nsm; ++i) {
            if (tab[hsm[i]] == 255) { fprintf(stderr, "SM %u not in the table\n", hsm[i]); return 1; }
            c1 += tab[hsm[i]];
        }
        printf("table: %d entries; %d SMs in partition 1, %d in partition 0\n", n, c1, nsm - c1);
        /* the same part values permuted over the SMs (fixed pseudo-random): as many SMs per buffer, partition-blind */
        memcpy(shuf, tab, sizeof tab);
        unsigned rs = 12345;
        for (int i = nsm - 1; i > 0; --i) {
            rs = rs * 1103515245u + 12345u;
            const int j = (int)((rs >> 8) % (unsigned)(i + 1));
            const unsigned char t = shuf[hsm[i]];
            shuf[hsm[i]] = shuf[hsm[j]];
            shuf[hsm[j]] = t;
        }
        int agree = 0;
        for (int i = 0; i < nsm; ++i) agree += shuf[hsm[i]] == tab[hsm[i]];
        printf("shuffled table agrees with the partition table on %d of %d SMs\n", agree, nsm);
        const int once = argc > 3 && !strcmp(argv[3], "--once"); /* one call each (for ncu) */
        const int sizes[4] = {4, 8, 16, 24};
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        printf("%6s %10s %10s %10s %12s\n", "S MB", "aligned", "shuffled", "ratio", "aligned TB/s");
        for (int si = 0; si < 4; ++si) {
            const size_t n16 = ((size_t)sizes[si] << 20) / 16;
            float ms[2][32];
            const int reps = once ? 1 : 15;
            for (int r = 0; r < reps; ++r)
                for (int m = 0; m < 2; ++m) {
                    const int mm = (r & 1) ? 1 - m : m; /* alternate which mode runs first */
                    CK(cudaMemcpy(dsel, mm ? shuf : tab, sizeof tab, cudaMemcpyHostToDevice));
                    CK(cudaMemset(flush, r, flush_b));
                    CK(cudaEventRecord(e0));
                    k_read<<<nsm, threads, smem>>>(X0, X1, dsel, n16, 3, dsm, sink);
                    CK(cudaEventRecord(e1));
                    CK(cudaEventSynchronize(e1));
                    CK(cudaEventElapsedTime(&ms[mm][r], e0, e1));
                }
            qsort(ms[0], reps, sizeof(float), cmp_f);
            qsort(ms[1], reps, sizeof(float), cmp_f);
            const float a = ms[0][reps / 2], b = ms[1][reps / 2];
            printf("%6d %10.3f %10.3f %10.3f %12.2f\n", sizes[si], a, b, b / a,
                   (double)nsm * 3 * ((size_t)sizes[si] << 20) / (a * 1e-3) / 1e12);
        }
        return 0;
    }
    fprintf(stderr, "usage: %s --discover | --time TABLE [--once]\n", argv[0]);
    return 2;
}
