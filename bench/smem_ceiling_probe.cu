/* smem_ceiling_probe.cu — session 20: what one SM can take in by TMA, alone and beside wgmma, with no sparse
   bookkeeping at all: the ceiling of a block-sparse tile shape on this GPU.

   Why: the b32 kernel's E over six sessions (0.36 / 0.41 / 0.51 at d 0.1 / 0.25 / 0.5) matches a model in which
   every byte that crosses shared memory — TMA writes plus wgmma operand reads — shares the SM's 128 B/clk
   (docs/hopper-spmm-notes.md "Session 20"). For b64 the same model allows E ~0.80 but the kernel reaches 0.50 at
   d 0.1, and session 18 called it a "per-SM bytes cap" (~40-45 B/clk into an SM). This probe separates the two: a
   persistent CTA per SM streams stages of random tiles from an L2-resident (or HBM-sized) working set into a ring
   (TMA, mbarriers, one producer thread, two consumer warpgroups, wgmma_wait 1 as the kernels do) and:
     mode 0  ingress only: 8 KB A + 32 KB B per stage, the consumers release at once (bytes per clock into an SM)
     mode 1  b64 one row per stage (the pair kernel at d 0.1): 8 KB A + 32 KB B, one consumer's four
             m64n256k16 per stage (consumers alternate stages): 40 KB in, 40 KB read, 2.1 MFLOP
     mode 2  dense-like 128 x 256 tile: 16 KB A + 32 KB B, both consumers, 48 KB in, 80 KB read, 4.2 MFLOP
     mode 3  b64 64 x 512 tile: 8 KB A + 64 KB B, each consumer its 256 columns: 72 KB in, 80 KB read, 4.2 MFLOP
   Modes 0 and 1 use an even ring depth: stage s then always belongs to the same consumer, so a consumer can never
   be a whole round ahead of a stage's barrier; mode 1 needs S >= 4 (a consumer keeps its previous stage until its
   next stage's wgmmas are issued: with S = 2 it would wait on the stage it holds). Results (TFLOPS, E against cuBLAS 8192^3 in the same run, bytes per clock per SM) go to stdout. The values are
   random and the products discarded (a sink keeps the wgmmas); nothing here is checked for correctness: it is a
   ceiling, not a kernel. Build: make probes (it needs only tma.cu of the library: bench/smem_ceiling_probe.sh builds it alone). */
#include <cuda_fp16.h>
#include "probe_util.h"
#include "cuda/hopper/ptx.cuh"
#include "cuda/hopper/tma.cuh"

using namespace bsk_hopper;

struct PP {
    int mode, stages, iters;
    int w0;           /* 1: wgmma_wait<0> and release per stage (the b64 / b128 kernels); 0: wait<1>, release the previous */
    int L;            /* stages per item (0: one item): after L stages each consumer stores its 64 x 256 tile (fp16) to C */
    int cl, mc;       /* session 21: clusters of cl CTAs (1, 2, 4); mc 1: the A tile is the same in every CTA of a cluster,
                         each of its 8 KB boxes loaded once and multicast to all; 2: the same for B; 0: no sharing */
    int rel_cl;       /* clusters: consumers release the peers' slots with a cluster-scope release (session 21's first
                         run: MEMBAR.ALL.GPU per arrival) instead of the bare remote arrive */
    __half *C;
    int a_rt, a_ct;   /* A tiles: rows / 64 and cols / 64 in range             */
    int b_kt, b_nt;   /* B: 64-row k-blocks and 256-column tiles in range       */
    unsigned seed;
    float *sink;
    long long *clk;   /* [0] clock64 delta, [1] globaltimer delta of CTA 0 (ns) */
};

static __host__ __device__ int slot_a(int mode) { return mode == 2 ? 16384 : 8192; }
static __host__ __device__ int slot_b(int mode) { return mode == 3 ? 65536 : 32768; }
static __host__ __device__ int stage_tx(int mode) { return slot_a(mode) + slot_b(mode); }

__device__ __forceinline__ unsigned hmix(unsigned x)
{
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}
__device__ __forceinline__ unsigned long long gtimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

__global__ void __launch_bounds__(384, 1) k_ceiling(const __grid_constant__ CUtensorMap tmA,
                                                    const __grid_constant__ CUtensorMap tmB, PP p)
{
    extern __shared__ __align__(1024) unsigned char sm_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)sm_raw + 1023) & ~(uintptr_t)1023);
    const int S = p.stages, SA = slot_a(p.mode), SB = slot_b(p.mode);
    const uint32_t sA = smem_u32(sm), sB = sA + S * SA, bars = sB + S * SB; /* full[S], empty[S] */
    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(bars + 8 * s, 1);
            /* with clusters every consumer of the cluster releases the slot in every CTA: a multicast refill
               writes into the peers' slots too */
            mbar_init(bars + 8 * (S + s), (p.mode == 2 || p.mode == 3 ? 2 : 1) * p.cl);
        }
        mbar_init_fence();
    }
    if (p.cl > 1) cluster_sync(); /* the peers' barriers exist before anyone multicasts or arrives on them */
    else __syncthreads();
    const uint32_t rank = p.cl > 1 ? cluster_ctarank() : 0u;
    const unsigned cid = blockIdx.x / (unsigned)p.cl; /* the cluster: its shared operand's tiles */
    const uint16_t all = (uint16_t)((1u << p.cl) - 1u);
    const long long c0 = clock64();
    const unsigned long long g0 = gtimer();
    if (wg == 0) {
        if (threadIdx.x == 0) {
            for (int it = 0; it < p.iters; ++it) {
                const int s = it % S;
                if (it >= S) {
                    if (p.cl > 1 && p.rel_cl) mbar_wait_cluster(bars + 8 * (S + s), ((it / S) & 1) ^ 1);
                    else mbar_wait(bars + 8 * (S + s), ((it / S) & 1) ^ 1); /* CTA scope: the slot was only read */
                }
                const unsigned own = hmix(p.seed ^ hmix(blockIdx.x * 1000003u + it));
                const unsigned shr = hmix(p.seed ^ hmix(cid * 7919u + 0x5bd1e995u + it));
                const unsigned h = p.mc == 1 ? shr : own;                      /* A's tile */
                const unsigned h2 = hmix((p.mc == 2 ? shr : own) + 0x9e3779b9u); /* B's tile */
                const int ar = (int)(h % (unsigned)p.a_rt), ac = (int)((h >> 8) % (unsigned)p.a_ct);
                const int bk = (int)(h2 % (unsigned)p.b_kt), bn = (int)((h2 >> 12) % (unsigned)p.b_nt);
                const uint32_t full = bars + 8 * s;
                mbar_arrive_expect_tx(full, (uint32_t)stage_tx(p.mode));
                for (int q = 0; q < SA / 8192; ++q) {
                    const int r = ((ar + q) % p.a_rt) * 64;
                    if (p.mc != 1) tma_load_2d(sA + s * SA + q * 8192, &tmA, full, ac * 64, r);
                    else if (q % p.cl == (int)rank) tma_load_2d_mc(sA + s * SA + q * 8192, &tmA, full, ac * 64, r, all);
                }
                for (int q = 0; q < SB / 8192; ++q) {
                    const int c = (bn * (SB / 8192) + q) * 64;
                    if (p.mc != 2) tma_load_2d(sB + s * SB + q * 8192, &tmB, full, c, bk * 64);
                    else if (q % p.cl == (int)rank) tma_load_2d_mc(sB + s * SB + q * 8192, &tmB, full, c, bk * 64, all);
                }
            }
        }
        return;
    }
    const int c = wg - 1;
    auto release = [&](int st) { /* this consumer is done with slot st (in every CTA of the cluster) */
        if (p.cl == 1) mbar_arrive(bars + 8 * (S + st));
        else
            for (int r = 0; r < p.cl; ++r) {
                if (p.rel_cl) mbar_arrive_cluster(mapa(bars + 8 * (S + st), (uint32_t)r)); /* MEMBAR.ALL.GPU first */
                else mbar_arrive_remote(mapa(bars + 8 * (S + st), (uint32_t)r));
            }
    };
    float acc[128]; /* no zero fill: a non-wgmma write of the accumulators serialises the wgmmas (C7515); the first
                       wgmma of a consumer starts them with scale_d = 0 */
    int prev = -1; /* this consumer's previous stage, released once its wgmmas are done */
    int fresh = 1; /* the next wgmma starts the accumulators (scale_d = 0) */
    for (int it = 0; it < p.iters; ++it) {
        const bool mine = (p.mode == 2 || p.mode == 3) ? true : (it & 1) == c;
        if (!mine) continue;
        const int s = it % S;
        mbar_wait(bars + 8 * s, (it / S) & 1);
        if (p.mode == 0) {
            if (t == 0) release(s);
            continue;
        }
        const uint64_t dA = smem_desc(sA + s * SA + (p.mode == 2 ? c * 8192 : 0), 16, 1024);
        const uint64_t dB = smem_desc(sB + s * SB + (p.mode == 3 ? c * 32768 : 0), 8192, 1024);
        wgmma_fence();
#pragma unroll
        for (int k = 0; k < 4; ++k)
            wgmma_m64n256k16_f16<0, 1>(acc, desc_advance(dA, 2 * k), desc_advance(dB, 128 * k), !(fresh && k == 0));
        wgmma_commit();
        fresh = 0;
        if (p.w0) {
            wgmma_wait<0>();
            if (t == 0) release(s);
        } else {
            wgmma_wait<1>();
            if (prev >= 0 && t == 0) release(prev);
            prev = s;
        }
        const int step = p.mode == 1 ? 2 : 1; /* this consumer's next stage is it + step */
        if (p.L > 0 && (it + step) / p.L != it / p.L) { /* the item's epilogue: 64 x 256 fp16 from the accumulators */
            wgmma_wait<0>();
            if (prev >= 0 && t == 0) release(prev);
            prev = -1;
            const unsigned hh = hmix(p.seed + 7u * blockIdx.x + 131u * (unsigned)it);
            const int r0 = (int)(hh % 128u) * 64 + 16 * (t / 32) + (t % 32) / 4, c0 = (int)((hh >> 8) % 32u) * 256;
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                const int col = c0 + 8 * j + 2 * (t % 4);
                *(__half2 *)(p.C + (size_t)r0 * 8192 + col) = __floats2half2_rn(acc[4 * j], acc[4 * j + 1]);
                *(__half2 *)(p.C + (size_t)(r0 + 8) * 8192 + col) = __floats2half2_rn(acc[4 * j + 2], acc[4 * j + 3]);
            }
            fresh = 1;
        }
    }
    wgmma_wait<0>();
    if (prev >= 0 && t == 0) release(prev);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 128; ++i) sum += acc[i];
    if (sum == 1.2345f) p.sink[threadIdx.x] = sum; /* never: keeps the wgmmas */
    if (blockIdx.x == 0 && threadIdx.x == 128) {
        p.clk[0] = clock64() - c0;
        p.clk[1] = (long long)(gtimer() - g0);
    }
    if (p.cl > 1) cluster_sync(); /* no CTA leaves while a peer may still arrive on its barriers (the producer
                                     warpgroup has exited: barrier.cluster waits for non-exited threads only) */
}

struct Launch {
    CUtensorMap tmA, tmB;
    PP p;
    int ctas, smem;
    int ex; /* cl 1: 0 = <<< >>> launch, 1 = cudaLaunchKernelEx with a cluster dimension of 1 */
};
static void run_launch(void *a)
{
    Launch *l = (Launch *)a;
    if (l->p.cl == 1 && !l->ex) { /* session 20's launch */
        k_ceiling<<<l->ctas, 384, l->smem>>>(l->tmA, l->tmB, l->p);
        return;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)l->p.cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)l->ctas);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = (size_t)l->smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, k_ceiling, l->tmA, l->tmB, l->p));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* line by line through a pipe: a hung configuration still leaves the others */
    int iters = argc > 1 ? atoi(argv[1]) : 1200, reps = argc > 2 ? atoi(argv[2]) : 9;
    const int n = 8192;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
        printf("smem_ceiling_probe: needs an sm_90 GPU (found %s)\n", prop.name);
        return 0;
    }
    void *flush, *A, *B, *C;
    cudaEvent_t e0, e1;
    cublasHandle_t h;
    CK(cudaMalloc(&flush, 256u << 20));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CB(cublasCreate(&h));
    const size_t bytes = (size_t)n * n * 2;
    CK(cudaMalloc(&A, bytes));
    CK(cudaMalloc(&B, bytes));
    CK(cudaMalloc(&C, bytes));
    {
        uint16_t *hbuf = (uint16_t *)malloc(bytes);
        for (size_t i = 0; i < (size_t)n * n; ++i) hbuf[i] = probe_f2h((float)((int)(probe_rnext() % 2001) - 1000) / 1000.f);
        CK(cudaMemcpy(A, hbuf, bytes, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hbuf, bytes, cudaMemcpyHostToDevice));
        free(hbuf);
    }
    float *sink;
    long long *clk;
    CK(cudaMalloc((void **)&sink, 4096));
    CK(cudaMalloc((void **)&clk, 64));
    CK(cudaFuncSetAttribute(k_ceiling, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));

    probe_gemm_arg g = {h, n, n, n, CUDA_R_16F, CUDA_R_16F, A, B, C};
    const double tg = probe_time(probe_run_gemm, &g, reps, flush, 256u << 20, e0, e1, NULL);
    const double cublas = 2.0 * n * n * (double)n / (tg * 1e9);
    printf("device %s, %d SMs; cuBLAS fp16 8192^3: %.1f TFLOPS\n", prop.name, prop.multiProcessorCount, cublas);
    printf("%-5s %-4s %-6s %-3s %-3s %-4s %-3s %-3s %-3s %-3s %9s %7s %8s %8s %8s %6s\n", "mode", "ws", "CTAs", "S", "w0", "L",
           "cl", "mc", "rel", "ex", "TFLOPS", "E", "inB/clk", "l2B/clk", "rdB/clk", "MHz");

    /* session 20 run 1: ingress alone, the ring depths, the SM count, the working set; run 2: wait_group 0 per stage
       and items of L stages with an epilogue, as the real kernels run them (those rows: git show e238895:bench/...).
       Session 21: does sharing one operand across a cluster by multicast (what cuBLAS's 1 x 2 clusters do) raise
       the ~38 B/clk per-SM ceiling of the 128 x 256 tile? mc 1 = A shared (the b128 SpMM's option: two N tiles of
       one block row), mc 2 = B shared (cuBLAS's; SpMM only for rows with the same columns). */
    static const struct { int mode, ws, ctas, S, w0, L, cl, mc, rel_cl, ex; } cfg[] = {
        {0, 3, 132, 4, 0, 0, 1, 0, 0, 0}, {0, 0, 132, 4, 0, 0, 1, 0, 0, 0}, {0, 3, 132, 4, 0, 0, 2, 2, 0, 1},
        {2, 3, 132, 4, 1, 0, 1, 0, 0, 0}, {2, 3, 132, 4, 1, 0, 2, 0, 0, 1}, {2, 3, 132, 4, 1, 0, 2, 1, 0, 1},
        {2, 3, 132, 4, 1, 0, 2, 2, 0, 1}, {2, 3, 132, 4, 1, 0, 4, 1, 0, 1}, {2, 3, 132, 4, 1, 0, 4, 2, 0, 1},
        {2, 0, 132, 4, 1, 0, 1, 0, 0, 0}, {2, 0, 132, 4, 1, 0, 2, 1, 0, 1},
        {3, 3, 132, 3, 1, 0, 1, 0, 0, 0}, {3, 3, 132, 3, 1, 0, 2, 1, 0, 1}, {1, 3, 132, 4, 1, 0, 1, 0, 0, 0},
        {2, 3, 132, 4, 1, 0, 1, 0, 0, 0}, {2, 3, 132, 4, 1, 0, 2, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; ++i) {
        Launch l;
        const int mode = cfg[i].mode, ws = cfg[i].ws;
        l.ctas = cfg[i].ctas > prop.multiProcessorCount ? prop.multiProcessorCount : cfg[i].ctas;
        l.smem = 1024 + cfg[i].S * stage_tx(mode) + 2 * 8 * cfg[i].S;
        if (cfg[i].cl > 1) { /* as many whole clusters as fit at once (a GPC with an odd SM count leaves one out) */
            cudaLaunchConfig_t oc = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = (unsigned)cfg[i].cl;
            at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
            oc.gridDim = dim3((unsigned)(l.ctas / cfg[i].cl * cfg[i].cl));
            oc.blockDim = dim3(384);
            oc.dynamicSmemBytes = (size_t)l.smem;
            oc.attrs = at;
            oc.numAttrs = 1;
            int ncl = 0;
            CK(cudaOccupancyMaxActiveClusters(&ncl, k_ceiling, &oc));
            if (ncl * cfg[i].cl < l.ctas) l.ctas = ncl * cfg[i].cl;
            l.ctas = l.ctas / cfg[i].cl * cfg[i].cl;
        }
        /* ws 0: A 8 MB (8192 x 512) + B 16 MB (1024 x 8192): L2-resident; 1: A 16 MB + B 64 MB (4096 rows);
           2: A 32 MB + B 128 MB (all of it: like a d 0.1 SpMM's B, without its reuse order) */
        /* ws 3 (session 21): A 4 MB + B 8 MB. Session 21 read ws 0 20 % lower than session 20 did (same code path, same
           clocks): 24 MB is at the edge of an L2 whose two partitions each keep a copy of what their SMs read */
        const int a_cols = ws == 0 ? 512 : ws == 1 ? 1024 : ws == 3 ? 256 : 2048,
                  b_rows = ws == 0 ? 1024 : ws == 1 ? 4096 : ws == 3 ? 512 : 8192;
        if (bsk_hopper_tmap_2d(&l.tmA, A, BSK_F16, n, a_cols, n, 64, 64) ||
            bsk_hopper_tmap_2d(&l.tmB, B, BSK_F16, b_rows, n, n, 64, 64)) {
            fprintf(stderr, "tensor map encoding failed\n");
            return 1;
        }
        l.p.mode = mode;
        l.p.stages = cfg[i].S;
        l.p.w0 = cfg[i].w0;
        l.p.L = cfg[i].L;
        l.p.cl = cfg[i].cl;
        l.p.mc = cfg[i].mc;
        l.p.rel_cl = cfg[i].rel_cl;
        l.ex = cfg[i].ex;
        l.p.C = (__half *)C;
        l.p.iters = iters;
        l.p.a_rt = n / 64;
        l.p.a_ct = a_cols / 64;
        l.p.b_kt = b_rows / 64;
        l.p.b_nt = n / (slot_b(mode) / 128);
        l.p.seed = 12345u + (unsigned)i;
        l.p.sink = sink;
        l.p.clk = clk;
        const double tm = probe_time(run_launch, &l, reps, flush, 256u << 20, e0, e1, NULL);
        long long hc[2];
        CK(cudaMemcpy(hc, clk, sizeof hc, cudaMemcpyDeviceToHost));
        const double mhz = hc[1] > 0 ? 1e3 * (double)hc[0] / (double)hc[1] : 0.0;
        const double stages = (double)iters * l.ctas;
        const double flop = mode == 0 ? 0.0 : stages * (mode == 1 ? 2.0 * 64 * 256 * 64 : 4.0 * 64 * 256 * 64);
        const double shared = cfg[i].mc == 1 ? slot_a(mode) : cfg[i].mc == 2 ? slot_b(mode) : 0;
        const double l2b = stages * (stage_tx(mode) - shared * (cfg[i].cl - 1) / cfg[i].cl); /* read from L2 */
        const double inb = stages * stage_tx(mode), rdb = mode == 0 ? 0.0 : stages * (mode == 1 ? 40960.0 : 81920.0);
        const double clks = tm * 1e-3 * mhz * 1e6 * l.ctas;
        const double tf = flop / (tm * 1e9);
        printf("%-5d %-4d %-6d %-3d %-3d %-4d %-3d %-3d %-3d %-3d %9.1f %7.3f %8.1f %8.1f %8.1f %6.0f\n", mode, ws, l.ctas, cfg[i].S,
               cfg[i].w0, cfg[i].L, cfg[i].cl, cfg[i].mc, cfg[i].rel_cl, cfg[i].ex, tf, tf / cublas, inb / clks, l2b / clks, rdb / clks, mhz);
    }
    const double tg2 = probe_time(probe_run_gemm, &g, reps, flush, 256u << 20, e0, e1, NULL);
    printf("cuBLAS again: %.1f TFLOPS\n", 2.0 * n * n * (double)n / (tg2 * 1e9));
    return 0;
}
