/* hopper_probe.c — device probe for the Hopper SpMM: cuBLAS dense GemmEx vs bsk_spmm at M = N = K (default
   8192) for b in {128, 64} x density {0.10, 0.25, 0.50} x {uniform, skewed}, fp16 (and a few bf16) inputs.
   Timing: CUDA events around one call, 3 warm-ups, median of ITERS, L2 flushed by a 256 MB memset before each
   timed call (outside the events). Each sparse result is checked against cuBLAS on the densified A
   (fp32 output) at full size. Prints TFLOPS on kept blocks (2 * nnzb * b^2 * N / t) and
   E = that / cuBLAS dense TFLOPS of the same run.
   --b64tile (session 18): the paired b64 tile against the split 64 x 512 and 64 x 256 tiles, alternated.
   --b64sweep (session 19): the same three b64 tiles at 8192^3, MoE 32768 x 4096 x 4096 and 2048^3, uniform and
   skewed, d 0.1 / 0.25 / 0.5 (the data for the default's choice between them).
   --b64slot (session 20): the 64 x 512 tile with C staged in its item's last ring slot against its direct epilogue,
   the pair and the 64 x 256 split, at 8192^3 (uniform, skewed), MoE (both) and 2048^3, alternated.
   --b64split (session 21): the 64 x 512 tile with the long-row split, partition queues and automatic L2 hints
   (the b128 kernel's CAN_SPLIT machinery) against session 20's, and at 2048^3 against the pair (use --nodefault).
   Built and run by bench/hopper_probe.sh on the device machine. Not part of the library. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include "bsk.h"

#include "cuda/hopper/tune.h"

#include "probe_util.h" /* CK / CB / CS, fp16 / bf16 conversions, the seeded random fill */

static int64_t M_ = 8192, N_ = 8192, K_ = 8192;
static int ITERS = 20;
static void *flush_buf;
static const size_t FLUSH = 256u << 20;
static cudaEvent_t ev0, ev1;

typedef probe_fn run_fn;

/* median ms of ITERS timed calls, each after an L2 flush; min in *mn */
static double time_it(run_fn f, void *arg, double *mn) { return probe_time(f, arg, ITERS, flush_buf, FLUSH, ev0, ev1, mn); }

/* ---- the runs */
typedef struct {
    bsk_context *ctx;
    bsk_bsr *A;
    bsk_dense *B, *C;
    bsk_op op;
} spmm_arg;
static void run_spmm(void *p)
{
    spmm_arg *s = (spmm_arg *)p;
    CS(bsk_spmm(s->ctx, s->op, 1.0f, s->A, s->B, 0.0f, s->C));
}

/* --prof: one more call with the kernel's cycle counters on (a -DBSK_HOPPER_PROF build; all zero otherwise):
   per consumer warpgroup the share of its time blocked on full barriers, in wgmma, in the epilogue, and the
   rest (barrier releases, meta reads); cycles per stage and per item; the producer's share blocked on empty
   slots. Sums over all CTAs. */
/* --prepprof: one more call with the prep kernel's phase marks on (a -DBSK_HOPPER_PROF build; nothing printed
   otherwise): the time of each of its phases, from its entry to the main kernel's end of waiting for it (session 25:
   ncu put the prep at 4.1 us without matching, 8.7 with it, at 2048^3). A cached list is dropped first, so the call
   builds it. */
static void print_prep_prof(spmm_arg *sa, int cached)
{
    unsigned long long *d, t[16];
    CK(cudaMalloc((void **)&d, sizeof t));
    CK(cudaMemset(d, 0, sizeof t));
    if (cached) CS(bsk_forget_patterns(sa->ctx));
    bsk__hopper_tune.prep_prof_buf = d;
    run_spmm(sa);
    CS(bsk_synchronize(sa->ctx));
    bsk__hopper_tune.prep_prof_buf = NULL;
    CK(cudaMemcpy(t, d, sizeof t, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    if (!t[0]) return; /* not a probe build, or no prep ran */
    static const char *nm[8] = {"", "masks", "rounds", "units", "split+hist", "scan", "write", "zero"};
    printf("   prep us:");
    unsigned long long prev = t[0];
    for (int i = 1; i < 8; i++)
        if (t[i]) {
            printf(" %s %.2f", nm[i], (t[i] - prev) * 1e-3);
            prev = t[i];
        }
    printf(" | prep total %.2f; main entry %+.2f, main waited %+.2f (from the prep's entry)\n", (t[7] - t[0]) * 1e-3,
           t[8] ? ((double)t[8] - (double)t[0]) * 1e-3 : 0.0, t[9] ? ((double)t[9] - (double)t[0]) * 1e-3 : 0.0);
}

static void print_prof(spmm_arg *sa)
{
    const int n = 16 * 1024;
    unsigned long long *d, *hb = (unsigned long long *)calloc(n, sizeof *hb);
    CK(cudaMalloc((void **)&d, n * sizeof *d));
    CK(cudaMemset(d, 0, n * sizeof *d));
    bsk__hopper_tune.prof_buf = d;
    run_spmm(sa);
    CS(bsk_synchronize(sa->ctx));
    bsk__hopper_tune.prof_buf = NULL;
    CK(cudaMemcpy(hb, d, n * sizeof *d, cudaMemcpyDeviceToHost));
    double t[16] = {0};
    for (int b = 0; b < 1024; b++)
        for (int i = 0; i < 16; i++) t[i] += (double)hb[16 * b + i];
    for (int c = 0; c < 2; c++) {
        const double *q = t + 8 * c, tot = q[3] > 0 ? q[3] : 1;
        printf("   prof consumer %d: wait %.1f%%  mma %.1f%%  epi %.1f%%  other %.1f%% | items %.0f stages %.0f | "
               "per stage: mma %.0f wait %.0f cyc | per item: epi %.0f cyc, total %.0f cyc\n",
               c, 100 * q[0] / tot, 100 * q[1] / tot, 100 * q[2] / tot, 100 * (tot - q[0] - q[1] - q[2]) / tot, q[4], q[5],
               q[5] > 0 ? q[1] / q[5] : 0, q[5] > 0 ? q[0] / q[5] : 0, q[4] > 0 ? q[2] / q[4] : 0,
               q[4] > 0 ? tot / q[4] : 0);
    }
    printf("   prof producer: blocked on empty slots %.1f%% of its time\n", t[15] > 0 ? 100 * t[14] / t[15] : 0);
    CK(cudaFree(d));
    free(hb);
}

int main(int argc, char **argv)
{
    int b64tile = 0, b64sweep = 0, b64slot = 0, b64split = 0, quick = 0, variants = 0, cf32 = 0, ncu = 0, d1 = 0, ring4 = 0, bands = 0, prof = 0, prepprof = 0, skew = 0, tall = 0, fin = 0, mc = 0, hint = 0, partcheck = 0,
        part = 0, pairmatch = 0, shortk = 0,
        s7 = 0, fabric = 0, fabric2 = 0;
    const char *part_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--variants")) variants = 1;
        else if (!strcmp(argv[i], "--cf32")) cf32 = 1;
        else if (!strcmp(argv[i], "--ncu")) ncu = 1; /* each kernel once, no checks: for a profiler run */
        else if (!strcmp(argv[i], "--d1")) d1 = 1;
        else if (!strcmp(argv[i], "--prof")) prof = 1; /* cycle accounting (needs a -DBSK_HOPPER_PROF build) */
        else if (!strcmp(argv[i], "--prepprof")) prepprof = 1; /* the prep kernel's phases (a -DBSK_HOPPER_PROF build) */
        else if (!strcmp(argv[i], "--bands")) bands = 1; /* the band L2 budget (8 / 16 / 32 MB) and L2 hints */
        else if (!strcmp(argv[i], "--skew")) skew = 1; /* b128 skewed vs uniform: the long-row split, orders */
        else if (!strcmp(argv[i], "--tall")) tall = 1; /* few long rows (small M, large K): the split's other case */
        else if (!strcmp(argv[i], "--nodefault")) quick = 2; /* only the sets asked for */
        else if (!strcmp(argv[i], "--part") && i + 1 < argc) part_file = argv[++i]; /* session 8: L2-partition queues */
        else if (!strcmp(argv[i], "--partcheck") && i + 1 < argc) { /* only the discovered map vs the ncu table */
            part_file = argv[++i];
            partcheck = 1;
        }
        else if (!strcmp(argv[i], "--fabric")) fabric = 1; /* session 9: what crosses the L2 fabric; row groups */
        else if (!strcmp(argv[i], "--fabric2")) fabric = fabric2 = 1; /* session 9 run 2: new default, promotion */
        else if (!strcmp(argv[i], "--hint")) hint = 1; /* session 8: L2 hints on unskewed rows by default */
        else if (!strcmp(argv[i], "--mc")) mc = 1; /* session 8: b128 with and without A multicast (2-CTA clusters) */
        else if (!strcmp(argv[i], "--s7")) s7 = 1; /* session 7: the L2 eviction hints on skewed and uniform b128 */
        else if (!strcmp(argv[i], "--final")) fin = 1; /* b128 uniform / skewed defaults, few-rows shapes split / not */
        else if (!strcmp(argv[i], "--b64slot2")) b64slot = 2;
        else if (!strcmp(argv[i], "--pairmatch")) b64split = 12, pairmatch = 1; /* session 24: paired b64 tiles, matched rows */
        else if (!strcmp(argv[i], "--pairmatch2")) b64split = 12, pairmatch = 2; /* session 24: matched pair vs the default */
        else if (!strcmp(argv[i], "--pairmatch3")) b64split = 12, pairmatch = 3; /* session 25: windowed, uncached */
        else if (!strcmp(argv[i], "--shortk")) shortk = 1; /* session 26: cuBLAS at M = N = size, K = d x size */
        else if (!strcmp(argv[i], "--prepcost")) b64split = 13; /* session 26: lists cached vs rebuilt, PDL off */
        else if (!strcmp(argv[i], "--smallsplit")) b64split = 14; /* session 26: few-blocks split vs direct mode */
        else if (!strcmp(argv[i], "--directbig")) b64split = 15; /* session 26 (next): direct mode past one item per CTA */
        else if (!strcmp(argv[i], "--pairmatch4")) b64split = 12, pairmatch = 4; /* session 25: tile vs matched pair, d >= 0.3 */
        else if (!strcmp(argv[i], "--b64slot")) b64slot = 1; /* session 20: 64 x 512 with C staged in the last slot */
        else if (!strcmp(argv[i], "--tgskew")) b64split = 4; /* session 21: tile groups on skewed rows */
        else if (!strcmp(argv[i], "--skewfab")) b64split = 11; /* session 23 (next): b128 skewed DRAM by source, with --ncu */
        else if (!strcmp(argv[i], "--longfirst")) b64split = 10; /* session 23: long units first, then tile groups */
        else if (!strcmp(argv[i], "--skew128")) b64split = 9; /* session 23: b128 skewed, split lengths x partition groups */
        else if (!strcmp(argv[i], "--b64old")) b64split = 8; /* session 22: the b64 default against sessions 20 / 21 */
        else if (!strcmp(argv[i], "--skewrule")) b64split = 7; /* session 22: the long-row split rule + one tile per group */
        else if (!strcmp(argv[i], "--skewsplit")) b64split = 6; /* session 22: tile-major order + long-row split, b64 skewed */
        else if (!strcmp(argv[i], "--skewb64")) b64split = 5; /* session 22: b64 skewed vs uniform (with --ncu / --prof) */
        else if (!strcmp(argv[i], "--b64pw")) b64split = 3; /* session 21: pair vs the 64 x 512 default at d >= 0.25 */
        else if (!strcmp(argv[i], "--b64split2")) b64split = 2; /* session 21: split lengths on long skewed rows */
        else if (!strcmp(argv[i], "--b64split")) b64split = 1; /* session 21: the split / partition queues on 64 x 512 */
        else if (!strcmp(argv[i], "--b64sweep")) b64sweep = 1; /* session 19: the b64 tiles over shapes and patterns */
        else if (!strcmp(argv[i], "--b64tile")) b64tile = 1; /* session 18: b64 paired 128 x 256 vs split 64 x 512 / 64 x 256 */
        else if (!strcmp(argv[i], "--ring4")) ring4 = 1; /* 4 ring stages + two store rounds vs 3 + one */   /* add the full pattern (d = 1): the kernel as a dense GEMM */
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) M_ = N_ = K_ = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) ITERS = atoi(argv[++i]);
    }
    if (ITERS < 1 || ITERS > 256) ITERS = 20;
    bsk_device_info info;
    CS(bsk_device_query(&info));
    /* DRAM: the figure the b64 dispatch reads (session 25) */
    printf("device: %s, cc %d.%d, %d SMs, L2 %lld MB, DRAM %d GB/s, driver %d, runtime %d\n", info.name, info.cc_major,
           info.cc_minor, info.multiprocessors, (long long)(info.l2_bytes >> 20), bsk__cuda_dram_gbs(0),
           info.driver_version, info.runtime_version);
    printf("size M=N=K=%lld, median of %d, L2 flushed (256 MB memset) before each timed call\n", (long long)M_, ITERS);
    cublasHandle_t h;
    bsk_context *ctx;
    probe_setup(&flush_buf, FLUSH, &ev0, &ev1, &h, &ctx);
    unsigned char *d_part = NULL; /* --part FILE: lines "smid partition" -> device table [1024] */
    if (part_file) {
        unsigned char tab[1024];
        memset(tab, 1, sizeof tab);
        FILE *pf_ = fopen(part_file, "r");
        if (!pf_) { fprintf(stderr, "cannot open %s\n", part_file); return 1; }
        int sm, pv, np = 0, n1 = 0;
        while (fscanf(pf_, "%d %d", &sm, &pv) == 2)
            if (sm >= 0 && sm < 1024) { tab[sm] = (unsigned char)(pv != 0); ++np; n1 += pv != 0; }
        fclose(pf_);
        printf("L2-partition table %s: %d SMs, %d in partition 1\n", part_file, np, n1);
        CK(cudaMalloc((void **)&d_part, sizeof tab));
        CK(cudaMemcpy(d_part, tab, sizeof tab, cudaMemcpyHostToDevice));
        part = !partcheck;
        /* the map the library finds by timing (src/cuda/l2_partition.cu) against the ncu table, up to the labels */
        bsk_context *pc;
        CS(bsk_create(&pc, BSK_BACKEND_CUDA));
        unsigned char dt[1025];
        float lat[1024];
        int smid[1024], n = 0;
        bsk_status ps = bsk__cuda_l2_partition_probe(pc, dt, lat, smid, &n);
        if (ps) printf("discovery: %s\n", bsk_status_string(ps));
        else {
            int same = 0, flip = 0;
            for (int i = 0; i < n; i++) {
                same += dt[smid[i]] == tab[smid[i]];
                flip += dt[smid[i]] != tab[smid[i]];
            }
            printf("discovery: valid %d, agrees with the ncu table on %d of %d SMs (%d with the labels swapped)\n",
                   dt[1024], same > flip ? same : flip, n, flip);
            printf("discovery latencies (cycles per load, by smid: partition):");
            for (int i = 0; i < n; i++) printf(" %d:%.0f%s", smid[i], lat[i], dt[smid[i]] ? "*" : "");
            printf("\n");
        }
        bsk_destroy(pc);
    }

    if (fabric) { /* the row groups use the map the library finds: have it known before the first SpMM */
        unsigned char dt[1025];
        float lat[1024];
        int smid[1024], n = 0, n1 = 0;
        bsk_status ps = bsk__cuda_l2_partition_probe(ctx, dt, lat, smid, &n);
        for (int i = 0; i < n && !ps; i++) n1 += dt[smid[i]];
        printf("L2-partition map (this context): %s, valid %d, %d of %d SMs in partition 1\n",
               ps ? bsk_status_string(ps) : "ok", ps ? 0 : dt[1024], n1, n);
    }
    /* --b64sweep's and --b64slot's MoE shape (32768 x 4096 x 4096) needs 2^27-element A and C buffers */
    const size_t big = b64sweep || b64slot || b64split ? (size_t)1 << 27 : 0;
    const size_t nAK = (size_t)(M_ * K_) > big ? (size_t)(M_ * K_) : big, nKN = (size_t)(K_ * N_),
                 nMN = (size_t)(M_ * N_) > big ? (size_t)(M_ * N_) : big;
    uint16_t *hbuf = (uint16_t *)malloc((nAK > nKN ? nAK : nKN) * 2);
    float *hC32 = (float *)malloc(nMN * 4);
    uint16_t *hC16 = (uint16_t *)malloc(nMN * 4);
    void *dA, *dB[2], *dC, *dRef;
    CK(cudaMalloc(&dA, nAK * 2));
    CK(cudaMalloc(&dB[0], nKN * 2));
    CK(cudaMalloc(&dB[1], nKN * 2));
    CK(cudaMalloc(&dC, nMN * 4));
    CK(cudaMalloc(&dRef, nMN * 4));
    for (int bf = 0; bf < 2; bf++) {
        probe_fill_rand16(hbuf, nKN, bf);
        CK(cudaMemcpy(dB[bf], hbuf, nKN * 2, cudaMemcpyHostToDevice));
    }

    /* cuBLAS dense baselines on random dense A, C in the input dtype (and fp32 for --cf32) */
    double dense_tf[2] = {1, 1}, dense_tf32 = 0;
    if (ncu) { /* the dense product once, for the profiler */
        probe_fill_rand16(hbuf, nAK, 0);
        CK(cudaMemcpy(dA, hbuf, nAK * 2, cudaMemcpyHostToDevice));
        probe_gemm_arg g = {h, M_, N_, K_, CUDA_R_16F, CUDA_R_16F, dA, dB[0], dC};
        probe_run_gemm(&g);
        CK(cudaDeviceSynchronize());
        printf("ncu: cuBLAS fp16 dense\n");
    }
    for (int bf = 0; bf < 2 && !ncu; bf++) {
        probe_fill_rand16(hbuf, nAK, bf);
        CK(cudaMemcpy(dA, hbuf, nAK * 2, cudaMemcpyHostToDevice));
        probe_gemm_arg g = {h, M_, N_, K_, bf ? CUDA_R_16BF : CUDA_R_16F, bf ? CUDA_R_16BF : CUDA_R_16F, dA, dB[bf], dC};
        double mn, ms = time_it(probe_run_gemm, &g, &mn);
        dense_tf[bf] = 2.0 * M_ * N_ * K_ / (ms * 1e-3) * 1e-12;
        printf("cuBLAS GemmEx %s->%s dense: %.3f ms (min %.3f)  %.1f TFLOPS\n", bf ? "bf16" : "fp16", bf ? "bf16" : "fp16",
               ms, mn, dense_tf[bf]);
        if (cf32 && !bf) {
            g.ct = CUDA_R_32F;
            ms = time_it(probe_run_gemm, &g, &mn);
            dense_tf32 = 2.0 * M_ * N_ * K_ / (ms * 1e-3) * 1e-12;
            printf("cuBLAS GemmEx fp16->fp32 dense: %.3f ms  %.1f TFLOPS\n", ms, dense_tf32);
        }
    }
    /* --shortk (session 26): the dense GEMM with the K loop of a kept row, M = N = size, K = the mean kept width at
       b 128 d 0.1 / 0.25 / 0.5 in multiples of 64 (K 819 = 0.1 x 8192 ran at 0.15 of the size^3 rate: an unaligned K
       leaves cuBLAS's fast kernels), what cuBLAS itself reaches with that short a loop, against its size^3 */
    for (int q = 0; shortk && q < 6; q++) {
        static const double kd[6] = {0.09375, 0.1015625, 0.125, 0.25, 0.5, 1.0};
        const int64_t k = (int64_t)(kd[q] * (double)K_ + 0.5);
        probe_gemm_arg g = {h, M_, N_, k, CUDA_R_16F, CUDA_R_16F, dA, dB[0], dC};
        double mn, ms = time_it(probe_run_gemm, &g, &mn);
        const double tf = 2.0 * M_ * N_ * k / (ms * 1e-3) * 1e-12;
        printf("shortk: cuBLAS fp16 %lldx%lldx%lld: %.4f ms (min %.4f) %.1f TFLOPS = %.3f of the size^3 dense\n",
               (long long)M_, (long long)N_, (long long)k, ms, mn, tf, tf / dense_tf[0]);
    }

    typedef struct {
        int b;
        double d;
        int skew, bf, b64w, band, nopdl, c32;
        const char *tag;
        int slot;           /* tune: slot_epi (64 x 512 tile: 0 C staged in the last ring slot, -1 direct) */
        int bswap, epi, classes, cluster;
        int b64m, pf, maxc; /* tune: b64_mode, pf (lead in stages, -1 off), max_ctas */
        int clacq, l2h;     /* tune: cl_acq, l2hint */
        int r4;             /* tune: ring4 */
        int split;          /* tune: split (0 default, -1 off, -2 auto, > 0 L) */
        int tg;             /* tune: tgroup (N tiles per tile group, 0 default) */
        int ptg;            /* tune: part_tg (N tiles per tile group inside the partition queues, 0 default) */
        int plong;          /* tune: part_long (long units first in the partition queues: 0 default, k > 0) */
        int part;           /* L2-partition queues: 0 default (skewed rows, discovered map), -1 off, 1 forced
                               with the table of --part FILE (ncu), 2 forced with the discovered map, 3 row
                               groups (tune.part_mode 2) with the discovered map, 4 session 8's default
                               (tune.part_mode 3: tile groups on skewed rows only), 5 row groups on unskewed
                               rows (tune.part_mode 4; run 2 of session 9 ran it as the default) */
        int promo;          /* tune.l2promo: TMA L2 promotion of A / B (0 256 B, 1 none, 2 64 B, 3 128 B) */
        int fab;            /* tune.fab: session 9 diagnostics (timing only: 1 no C store, 2 A block 0, 4 B tile 0) */
        int pm;             /* tune.pair_match: 0 default, 1 matched rows, 2 matched within 16 rows, -1 adjacent rows */
        int opt;            /* 1: op T (Aᵀ·B; square shapes only) */
        int cache;          /* 1: the pattern cache on (timed calls reuse the work list: the main kernel alone) */
        int direct;         /* tune.direct: 0 default, -1 off (the prep), 1 direct mode wherever it applies */
        int seed;           /* pattern seed (0: 1000 + the index of (b, d, pattern) in the default list, so
                               that variants of one case run on the same pattern) */
        int64_t m, n, k;    /* another shape than M_ = N_ = K_ (its own cuBLAS baseline) */
    } cfg;
    cfg cfgs[256];
    int nc = 0;
#define ADD(...) (nc < 256 ? (void)(cfgs[nc++] = (cfg){__VA_ARGS__}) : (void)0)
    const double ds[3] = {0.10, 0.25, 0.50};
    if (!ncu && quick != 2)
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 3; di++)
                for (int sk = 0; sk < 2; sk++) {
                    if (quick && (sk || di == 1)) continue;
                    ADD(.b = bi ? 64 : 128, .d = ds[di], .skew = sk, .tag = "");
                }
    if (!quick && !ncu) {
        ADD(.b = 128, .d = 0.25, .bf = 1, .tag = "bf16");
        ADD(.b = 64, .d = 0.25, .bf = 1, .tag = "bf16");
    }
    if (variants) {
        ADD(.b = 128, .d = 0.50, .maxc = 66, .tag = "66 CTAs");
        ADD(.b = 64, .d = 0.50, .maxc = 66, .tag = "66 CTAs");
        for (int di = 0; di < 3; di++) ADD(.b = 64, .d = ds[di], .b64m = 1, .tag = "split 64x256");
        for (int di = 0; di < 3; di++) ADD(.b = 128, .d = ds[di], .l2h = 1, .tag = "L2 hints");
        ADD(.b = 128, .d = 0.10, .skew = 1, .l2h = 1, .tag = "L2 hints");
        ADD(.b = 64, .d = 0.10, .l2h = 1, .tag = "L2 hints");
        ADD(.b = 64, .d = 0.50, .l2h = 1, .tag = "L2 hints");
        ADD(.b = 128, .d = 0.10, .pf = 4, .tag = "L2 prefetch lead 4");
        ADD(.b = 128, .d = 0.50, .epi = 1, .tag = "direct epilogue, 4 stages");
        ADD(.b = 128, .d = 0.10, .cluster = 1, .tag = "cluster 2, 3 st + TMA store");
        ADD(.b = 128, .d = 0.50, .cluster = 1, .tag = "cluster 2, 3 st + TMA store");
        ADD(.b = 128, .d = 0.50, .cluster = 1, .clacq = 1, .tag = "cluster 2, 3 st, cluster-scope waits");
        ADD(.b = 128, .d = 0.10, .cluster = 3, .tag = "cluster 2, 4 st + direct");
        ADD(.b = 128, .d = 0.50, .cluster = 3, .tag = "cluster 2, 4 st + direct");
        ADD(.b = 128, .d = 0.50, .cluster = 3, .l2h = 1, .tag = "cluster 2, 4 st + direct, L2 hints");
        ADD(.b = 128, .d = 0.10, .tag = "repeat");
        ADD(.b = 64, .d = 0.50, .tag = "repeat");
    }
    if (b64tile) { /* b64 tiles, uniform, alternated pair / 64 x 512 / 64 x 256 / 64 x 256 / 64 x 512 / pair: bytes into
                      each SM per MFLOP ~19 / 17 / 19 KB at d 0.1 (docs/hopper-spmm-notes.md, session 18) */
        for (int di = 0; di < 3; di++)
            for (int r = 0; r < 6; r++) {
                const int v = r < 3 ? r : 5 - r; /* 0 pair, 1 split 64 x 512, 2 split 64 x 256 */
                ADD(.b = 64, .d = ds[di], .b64m = v ? 1 : 2, .b64w = v == 1 ? 256 : 0,
                    .tag = v == 0 ? "pair 128x256" : v == 1 ? "split 64x512" : "split 64x256");
            }
    }
    if (b64sweep) { /* per shape, pattern and density: pair / 64 x 512 / 64 x 256 / 64 x 256 / 64 x 512 / pair */
        static const int64_t sh[3][3] = {{0, 0, 0}, {32768, 4096, 4096}, {2048, 2048, 2048}};
        for (int q = 0; q < 3; q++)
            for (int sk = 0; sk < 2; sk++)
                for (int di = 0; di < 3; di++)
                    for (int r = 0; r < 6; r++) {
                        const int v = r < 3 ? r : 5 - r;
                        ADD(.b = 64, .d = ds[di], .skew = sk, .m = sh[q][0], .n = sh[q][1], .k = sh[q][2],
                            .b64m = v ? 1 : 2, .b64w = v == 1 ? 256 : 0,
                            .tag = v == 0 ? "pair 128x256" : v == 1 ? "split 64x512" : "split 64x256");
                    }
    }
    if (b64split == 4) { /* session 21: skewed b64 d 0.1 reads 0.70 of uniform. Hypothesis: the long rows' length
                            class is a band of few units, so the CTAs running together span many N tiles (8 MB of B each
                            at 8192^3 b64) and B misses L2; tile groups of 1-4 N tiles through all bands keep them on
                            few tiles (A, 13 MB at d 0.1, stays in L2 anyway). Partition queues off for those (they set
                            their own groups). A B C D D C B A per point. */
        static const struct { int b; double d; int sk; } pt[4] = {{64, 0.10, 1}, {64, 0.25, 1}, {64, 0.10, 0}, {128, 0.10, 1}};
        static const char *tg[6] = {"default", "tg 1, part off", "tg 2, part off", "tg 4, part off",
                                    "part, groups of 2", "part, groups of 4"};
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < 12; r++) {
                const int v = r < 6 ? r : 11 - r;
                ADD(.b = pt[q].b, .d = pt[q].d, .skew = pt[q].sk, .part = v >= 1 && v <= 3 ? -1 : 0,
                    .tg = v == 1 ? 1 : v == 2 ? 2 : v == 3 ? 4 : 0, .ptg = v == 4 ? 2 : v == 5 ? 4 : 0, .tag = tg[v]);
            }
    } else if (b64split == 3) { /* session 21, H100: the 64 x 512 tile read 0.59 at 8192^3 d 0.5 in bsk bench where session 12's
                            pair read 0.65 (other runs): the two alternated A B B A (op N) */
        static const struct { int64_t m, n, k; double d; int sk; } pt[6] = {
            {0, 0, 0, 0.25, 0}, {0, 0, 0, 0.50, 0}, {0, 0, 0, 0.50, 1}, {32768, 4096, 4096, 0.50, 0},
            {32768, 4096, 4096, 0.25, 0}, {0, 0, 0, 0.10, 0}};
        for (int q = 0; q < 6; q++)
            for (int r = 0; r < 4; r++) {
                const int v = r == 0 || r == 3;
                ADD(.b = 64, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k, .b64m = v ? 2 : 0,
                    .tag = v ? "pair" : "default (64x512)");
            }
    } else if (b64split == 2) { /* session 21, run 2: the forced split L 16 gained 11 % at 8192^3 skewed d 0.25 (lost 2-4 % at
                            d 0.1 and MoE skewed d 0.1): L 16 / 32 against the default at longer mean rows, A B C C B A */
        static const struct { int64_t m, n, k; double d; int sk; } pt[5] = {
            {0, 0, 0, 0.25, 1}, {0, 0, 0, 0.50, 1}, {0, 0, 0, 0.25, 0}, {32768, 4096, 4096, 0.25, 1}, {32768, 4096, 4096, 0.50, 1}};
        static const char *tg[3] = {"64x512 new", "64x512 new, L 16", "64x512 new, L 32"};
        for (int q = 0; q < 5; q++)
            for (int r = 0; r < 6; r++) {
                const int v = r < 3 ? r : 5 - r;
                ADD(.b = 64, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k,
                    .split = v == 0 ? 0 : v == 1 ? 16 : 32, .tag = tg[v]);
            }
    } else if (b64split == 1) { /* session 21: the 64 x 512 slot tile got the b128 kernel's CAN_SPLIT machinery (long-row split,
                       partition queues on skewed rows, automatic L2 hints on short rows). "old" = all three off (the
                       session 20 kernel), "new" = the defaults, "L 16" = a forced split; 2048^3 with the tile forced
                       against the pair (the default there). Alternated A B C C B A per point. */
        static const int64_t sh[3][3] = {{0, 0, 0}, {32768, 4096, 4096}, {2048, 2048, 2048}};
        for (int q = 0; q < 3; q++)
            for (int sk = 0; sk < 2; sk++)
                for (int di = 0; di < 3; di++) {
                    if (q < 2 && (di == 2 || (q == 1 && di == 1) || (!sk && di == 1))) continue;
                    for (int r = 0; r < 6; r++) {
                        const int v = r < 3 ? r : 5 - r;
                        if (q < 2) {
                            if (v == 0) ADD(.b = 64, .d = ds[di], .skew = sk, .m = sh[q][0], .n = sh[q][1], .k = sh[q][2],
                                            .part = -1, .l2h = -1, .split = -1, .tag = "64x512 old");
                            else if (v == 1) ADD(.b = 64, .d = ds[di], .skew = sk, .m = sh[q][0], .n = sh[q][1],
                                                 .k = sh[q][2], .tag = "64x512 new");
                            else ADD(.b = 64, .d = ds[di], .skew = sk, .m = sh[q][0], .n = sh[q][1], .k = sh[q][2],
                                     .split = 16, .tag = "64x512 new, L 16");
                        } else {
                            if (v == 0) ADD(.b = 64, .d = ds[di], .skew = sk, .m = 2048, .n = 2048, .k = 2048, .tag = "default (pair)");
                            else if (v == 1) ADD(.b = 64, .d = ds[di], .skew = sk, .m = 2048, .n = 2048, .k = 2048,
                                                 .b64w = 256, .part = -1, .l2h = -1, .split = -1, .tag = "64x512 old");
                            else ADD(.b = 64, .d = ds[di], .skew = sk, .m = 2048, .n = 2048, .k = 2048, .b64w = 256,
                                     .tag = "64x512 new");
                        }
                    }
                }
    }
    if (b64slot) { /* session 20: the 64 x 512 tile's C staged in its last ring slot (TMA store) against its direct
                      epilogue, the pair and the 64 x 256 split; per shape, pattern, density, alternated A B C D D C B A */
        static const int64_t sh[3][3] = {{0, 0, 0}, {32768, 4096, 4096}, {2048, 2048, 2048}};
        static const char *tg[4] = {"pair 128x256", "64x512 slot", "64x512 direct", "split 64x256"};
        for (int q = b64slot == 2 ? 2 : 0; q < 3; q++) /* --b64slot2: 2048^3 only, both patterns */
            for (int sk = 0; sk < 2; sk++) {
                if (q == 2 && sk && b64slot != 2) continue;
                for (int di = 0; di < 3; di++)
                    for (int r = 0; r < 8; r++) {
                        const int v = r < 4 ? r : 7 - r;
                        ADD(.b = 64, .d = ds[di], .skew = sk, .m = sh[q][0], .n = sh[q][1], .k = sh[q][2],
                            .b64m = v ? 1 : 2, .b64w = v == 1 || v == 2 ? 256 : 0, .slot = v == 2 ? -1 : 0, .tag = tg[v]);
                    }
            }
    }
    if (ring4) { /* same-run A/B: 4 stages + two store rounds (r4 2) against 3 stages + one (r4 1), alternated */
        const double dd[4] = {0.10, 0.25, 0.50, 1.0};
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 4; di++)
                for (int k = 0; k < 2; k++)
                    ADD(.b = bi ? 64 : 128, .d = dd[di], .r4 = 2 - k, .tag = k ? "3 stages" : "4 stages, 2 rounds");
    }
    if (bands) { /* DRAM re-reads (ncu: b128 d .25 reads 649 MB, ~2x the band model): band budget and L2 hints */
        const double dd[3] = {0.10, 0.25, 0.50};
        for (int bi = 0; bi < 2; bi++)
            for (int di = 0; di < 3; di++) {
                if (bi && di != 1) continue;
                const int b = bi ? 64 : 128;
                ADD(.b = b, .d = dd[di], .band = 8, .tag = "band 8 MB");
                ADD(.b = b, .d = dd[di], .tag = "band 16 MB (default)");
                ADD(.b = b, .d = dd[di], .band = 32, .tag = "band 32 MB");
                ADD(.b = b, .d = dd[di], .l2h = 1, .tag = "band 16 MB + L2 hints");
                ADD(.b = b, .d = dd[di], .band = 4, .tag = "band 4 MB");
            }
    }
    if (d1) { /* every block kept: what the mainloop does with no sparsity at all, same tile as cuBLAS-class GEMMs */
        ADD(.b = 128, .d = 1.0, .tag = "full pattern");
        ADD(.b = 64, .d = 1.0, .tag = "full pattern");
        if (ncu) ADD(.b = 128, .d = 1.0, .tag = "ncu full pattern");
    }
    if (skew && !ncu) { /* session 6: skewed b128 against uniform: tile groups, the long-row split */
        ADD(.b = 128, .d = 0.10, .tag = "uniform default");
        ADD(.b = 128, .d = 0.10, .tg = 8, .tag = "uniform tg 8");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 4, .tag = "tg 4");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 8, .tag = "tg 8");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 16, .tag = "tg 16");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 4, .split = 16, .tag = "tg 4 split 16");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 8, .split = 16, .tag = "tg 8 split 16");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 8, .split = 8, .tag = "tg 8 split 8");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 16, .split = 16, .tag = "tg 16 split 16");
        ADD(.b = 128, .d = 0.10, .skew = 1, .split = 16, .tag = "split 16");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default (repeat)");
        ADD(.b = 128, .d = 0.10, .skew = 1, .seed = 2001, .tag = "seed 2001 default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .seed = 2001, .tg = 8, .tag = "seed 2001 tg 8");
        ADD(.b = 128, .d = 0.10, .skew = 1, .seed = 2001, .tg = 8, .split = 16, .tag = "seed 2001 tg 8 split 16");
        for (int di = 1; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .tag = "uniform default");
            ADD(.b = 128, .d = ds[di], .tg = 8, .tag = "uniform tg 8");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tag = "default");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tg = 8, .tag = "tg 8");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tg = 4, .tag = "tg 4");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tg = 8, .split = di == 1 ? 16 : 32, .tag = "tg 8 split 16/32");
        }
    }
    if (skew && ncu && !s7) { /* one call each under ncu: DRAM bytes and L2 hit rate, skewed vs uniform */
        ADD(.b = 128, .d = 0.10, .tag = "ncu uniform");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "ncu skewed default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 8, .tag = "ncu skewed tg 8");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tg = 8, .split = 16, .tag = "ncu skewed tg 8 split 16");
        ADD(.b = 128, .d = 0.25, .skew = 1, .tag = "ncu skewed default");
        ADD(.b = 128, .d = 0.25, .skew = 1, .tg = 8, .tag = "ncu skewed tg 8");
    }
    if (s7 && !ncu) { /* session 7: the C-store L2 hint alone (l2hint 2) and session 6's (1: + A evict_last), skewed
                         vs uniform b128, default runs alternated (run 2 also timed an evict_first hint on the
                         B loads of long items, removed: docs/hopper-spmm-notes.md) */
        ADD(.b = 128, .d = 0.10, .tag = "uniform default");
        ADD(.b = 128, .d = 0.10, .l2h = 2, .tag = "uniform hint C");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .l2h = 2, .tag = "hint C");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default (repeat)");
        ADD(.b = 128, .d = 0.10, .skew = 1, .l2h = 1, .tag = "hint A + C (session 6)");
        ADD(.b = 128, .d = 0.10, .skew = 1, .seed = 2001, .tag = "seed 2001 default");
        for (int di = 1; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .tag = "uniform default");
            ADD(.b = 128, .d = ds[di], .l2h = 2, .tag = "uniform hint C");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tag = "default");
            ADD(.b = 128, .d = ds[di], .skew = 1, .l2h = 2, .tag = "hint C");
        }
        ADD(.b = 64, .d = 0.10, .skew = 1, .tag = "default");
        ADD(.b = 64, .d = 0.10, .skew = 1, .l2h = 2, .tag = "hint C");
    }
    if (s7 && ncu) { /* DRAM bytes, b128 d .1 */
        ADD(.b = 128, .d = 0.10, .tag = "ncu uniform");
        ADD(.b = 128, .d = 0.10, .l2h = 2, .tag = "ncu uniform hint C");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "ncu skewed default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .l2h = 2, .tag = "ncu skewed hint C");
    }
    if (part && ncu) { /* one call each under ncu: fabric / DRAM traffic with and without the partition queues */
        for (int di = 0; di < 3; di += 2) {
            ADD(.b = 128, .d = ds[di], .tag = "ncu default");
            ADD(.b = 128, .d = ds[di], .part = 1, .tag = "ncu L2-partition queues");
        }
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "ncu skewed default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .part = 1, .tag = "ncu skewed L2-partition queues");
    }
    if (part && !ncu) { /* session 8: the L2-partition queues — off, the default (skewed rows only, the map the
                           library discovered), forced with the ncu table / with the discovered map; alternated */
        for (int di = 0; di < 3; di++)
            for (int sk = 0; sk < 2; sk++) {
                ADD(.b = 128, .d = ds[di], .skew = sk, .part = -1, .tag = "queues off");
                ADD(.b = 128, .d = ds[di], .skew = sk, .tag = "default");
                ADD(.b = 128, .d = ds[di], .skew = sk, .part = 1, .tag = "queues forced, ncu table");
                ADD(.b = 128, .d = ds[di], .skew = sk, .part = 2, .tag = "queues forced, discovered map");
                ADD(.b = 128, .d = ds[di], .skew = sk, .tag = "default");
                ADD(.b = 128, .d = ds[di], .skew = sk, .part = -1, .tag = "queues off");
            }
    }
    if (hint) { /* session 8: the default's L2 hints (A evict_last + C evict_first on rows the prep finds not skewed)
                   against none, alternated; skewed rows (no hints by default) as a control */
        for (int di = 0; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .l2h = -1, .tag = "no hints");
            ADD(.b = 128, .d = ds[di], .tag = "default");
            ADD(.b = 128, .d = ds[di], .tag = "default");
            ADD(.b = 128, .d = ds[di], .l2h = -1, .tag = "no hints");
        }
        ADD(.b = 128, .d = 0.10, .skew = 1, .l2h = -1, .tag = "no hints");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default");
        ADD(.b = 128, .d = 0.25, .bf = 1, .l2h = -1, .tag = "no hints");
        ADD(.b = 128, .d = 0.25, .bf = 1, .tag = "default");
    }
    if (mc) { /* session 8: where the 2-CTA cluster kernel's L2 traffic goes (ncu: L2 requests / sectors per
                 source) against the unclustered default; timed alternately when not under ncu */
        const double dd[2] = {0.50, 0.10};
        for (int di = 0; di < 2; di++) {
            ADD(.b = 128, .d = dd[di], .tag = "default");
            ADD(.b = 128, .d = dd[di], .cluster = 1, .tag = "cluster 2, 3 st + TMA store");
            if (!ncu) {
                ADD(.b = 128, .d = dd[di], .cluster = 1, .tag = "cluster 2, 3 st + TMA store");
                ADD(.b = 128, .d = dd[di], .tag = "default");
            }
        }
    }
    if (fin) { /* the defaults: b128 uniform and skewed, and few-rows shapes with the default (automatic) split and without */
        for (int di = 0; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .tag = "default");
            ADD(.b = 128, .d = ds[di], .skew = 1, .tag = "default");
        }
        const int64_t sh[4][3] = {{512, 512, 32768}, {256, 4096, 16384}, {1024, 1024, 16384}, {2048, 2048, 8192}};
        const double sd[4] = {0.5, 1.0, 0.25, 0.5};
        for (int q = 0; q < 4; q++) {
            ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .split = -1, .tag = "split off");
            ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .tag = "default");
        }
        ADD(.b = 128, .d = 1.0, .m = 256, .n = 4096, .k = 16384, .bf = 1, .tag = "default");
        ADD(.b = 128, .d = 1.0, .m = 256, .n = 4096, .k = 16384, .c32 = 1, .split = -1, .tag = "C fp32 split off");
        ADD(.b = 128, .d = 1.0, .m = 256, .n = 4096, .k = 16384, .c32 = 1, .tag = "C fp32 default");
    }
    if (tall) { /* few long rows: without the split the items do not fill the GPU */
        const int64_t sh[3][3] = {{512, 512, 32768}, {256, 4096, 16384}, {2048, 2048, 8192}};
        const double sd[3] = {0.5, 1.0, 0.5};
        for (int q = 0; q < 3; q++) {
            ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .split = -1, .tag = "tall split off");
            ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .split = -2, .tag = "tall split auto");
            ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .split = 16, .tag = "tall split L 16");
            if (q < 2)
                ADD(.b = 128, .d = sd[q], .m = sh[q][0], .n = sh[q][1], .k = sh[q][2], .split = 32, .tag = "tall split L 32");
        }
    }
    if (cf32) {
        ADD(.b = 128, .d = 0.10, .c32 = 1, .tag = "C fp32");
        ADD(.b = 128, .d = 0.50, .c32 = 1, .tag = "C fp32");
    }
    if (fabric2 && ncu) { /* session 9 run 2: the new default (row groups) with and without L2 promotion */
        for (int di = 0; di < 3; di += 2) {
            ADD(.b = 128, .d = ds[di], .part = 5, .tag = "ncu row groups on unskewed rows");
            ADD(.b = 128, .d = ds[di], .part = 5, .promo = 1, .tag = "ncu row groups, no L2 promotion");
            ADD(.b = 128, .d = ds[di], .part = 5, .promo = 3, .tag = "ncu row groups, L2 promotion 128 B");
        }
    }
    if (fabric2 && !ncu) { /* session 9 run 2: session 8's default against the new one (row groups on unskewed
                              rows), and the TMA L2 promotion, alternated */
        for (int di = 0; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .part = 4, .tag = "session-8 default");
            ADD(.b = 128, .d = ds[di], .part = 5, .tag = "row groups on unskewed rows");
            ADD(.b = 128, .d = ds[di], .part = 5, .promo = 1, .tag = "row groups, no L2 promotion");
            ADD(.b = 128, .d = ds[di], .part = 5, .promo = 3, .tag = "row groups, L2 promotion 128 B");
            ADD(.b = 128, .d = ds[di], .part = 5, .tag = "row groups on unskewed rows");
            ADD(.b = 128, .d = ds[di], .part = 4, .tag = "session-8 default");
        }
        for (int di = 0; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .skew = 1, .part = 4, .tag = "session-8 default");
            ADD(.b = 128, .d = ds[di], .skew = 1, .part = 5, .tag = "row groups on unskewed rows");
        }
        ADD(.b = 128, .d = 0.25, .bf = 1, .part = 4, .tag = "session-8 default");
        ADD(.b = 128, .d = 0.25, .bf = 1, .part = 5, .tag = "row groups on unskewed rows");
    }
    if (fabric && !fabric2 && ncu) { /* session 9: the fabric / L2 / DRAM traffic by source (one call each) */
        ADD(.b = 128, .d = 0.50, .tag = "ncu default");
        ADD(.b = 128, .d = 0.10, .tag = "ncu default");
        ADD(.b = 128, .d = 0.10, .fab = 1, .tag = "ncu no C store");
        ADD(.b = 128, .d = 0.10, .fab = 2, .tag = "ncu A block 0");
        ADD(.b = 128, .d = 0.10, .fab = 4, .tag = "ncu B tile 0");
        ADD(.b = 128, .d = 0.10, .part = 3, .tag = "ncu row groups");
        ADD(.b = 128, .d = 0.50, .part = 3, .tag = "ncu row groups");
    }
    if (fabric && !fabric2 && !ncu) { /* session 9: what each traffic source costs in time (fab: wrong results, timing only),
                             and the row groups (part_mode 2) against the default, alternated */
        ADD(.b = 128, .d = 0.10, .tag = "default");
        ADD(.b = 128, .d = 0.10, .part = 3, .tag = "row groups");
        ADD(.b = 128, .d = 0.10, .fab = 1, .tag = "DIAG no C store");
        ADD(.b = 128, .d = 0.10, .fab = 2, .tag = "DIAG A block 0");
        ADD(.b = 128, .d = 0.10, .fab = 4, .tag = "DIAG B tile 0");
        ADD(.b = 128, .d = 0.10, .fab = 7, .tag = "DIAG all three");
        ADD(.b = 128, .d = 0.10, .part = 3, .tag = "row groups");
        ADD(.b = 128, .d = 0.10, .tag = "default");
        for (int di = 1; di < 3; di++) {
            ADD(.b = 128, .d = ds[di], .tag = "default");
            ADD(.b = 128, .d = ds[di], .part = 3, .tag = "row groups");
            ADD(.b = 128, .d = ds[di], .fab = 1, .tag = "DIAG no C store");
            ADD(.b = 128, .d = ds[di], .part = 3, .tag = "row groups");
            ADD(.b = 128, .d = ds[di], .tag = "default");
        }
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .part = 3, .tag = "row groups");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "default");
    }
    if (b64split == 11 && ncu) { /* prepared in session 23 for the next: b128 8192^3 d 0.1 skewed reads 556 MB of DRAM vs 209
                                   uniform (H100) and every reordering tried moved it by <= 7 %. Which operand is it? One
                                   call each under ncu (HOPPER_NCU_METRICS=1): tune.fab 1 no C store, 2 every A load reads
                                   block 0, 4 every B load reads N tile 0's panel (wrong results: timing / bytes only). */
        for (int sk = 0; sk < 2; sk++) {
            ADD(.b = 128, .d = 0.10, .skew = sk, .tag = "fab default");
            ADD(.b = 128, .d = 0.10, .skew = sk, .fab = 1, .tag = "fab no C store");
            ADD(.b = 128, .d = 0.10, .skew = sk, .fab = 2, .tag = "fab A block 0");
            ADD(.b = 128, .d = 0.10, .skew = sk, .fab = 4, .tag = "fab B tile 0");
        }
    }
    if (b64split == 13) { /* session 26 --prepcost: what the prep kernel costs a small call (use --size 2048): the same
                             work list rebuilt by every call (prep + main kernel), cached (the main kernel alone), and
                             rebuilt with PDL off; b 128 and the b 64 adjacent pair, A B C C B A per point */
        /* run 1 (call 2): rebuilt / cached / rebuilt without PDL: the prep cost 10-19 %, PDL saved ~7 %. Run 2: direct
           mode (no prep where every item has a CTA of its own) against the prep and the cached list */
        static const char *tgc[3] = {"rebuilt (prep)", "cached", "direct"};
        for (int bq = 0; bq < 2; bq++)
            for (int di = 0; di < 3; di++)
                for (int r = 0; r < 6; r++) {
                    const int v = r < 3 ? r : 5 - r;
                    ADD(.b = bq ? 64 : 128, .d = ds[di], .b64m = bq ? 2 : 0, .pm = bq ? -1 : 0, .cache = v == 1,
                        .direct = v == 2 ? 1 : -1, .tag = tgc[v]);
                }
    }
    if (b64split == 15) { /* --directbig (prepared in session 26, not run yet): direct mode with more items than CTAs
                             (tune.direct 2: no prep, items in unsorted tile-major order from the zeroed queue, no bands,
                             no length order, no split) against the default, at the size given (--size 4096: 512 b128
                             items; 8192) and the MoE shape, uniform and skewed, b 128 and the b64 pair, A B B A. Predicted:
                             a gain at 4096^3 where A fits L2 and rows are uniform (the prep's ~3-5 us of ~50-150), a loss
                             on skewed rows (no longest-first order) and at d 0.5 8192^3 (A 64 MB re-read per N tile) */
        static const struct { int64_t m, n, k; } sh[2] = {{0, 0, 0}, {32768, 4096, 4096}};
        for (int q = 0; q < 2; q++)
            for (int bq = 0; bq < 2; bq++)
                for (int sk = 0; sk < 2; sk++)
                    for (int di = 0; di < 3; di += 2)
                        for (int r = 0; r < 4; r++) {
                            const int v = r == 1 || r == 2;
                            ADD(.b = bq ? 64 : 128, .d = ds[di], .skew = sk, .m = sh[q].m, .n = sh[q].n, .k = sh[q].k,
                                .b64m = bq ? 2 : 0, .pm = bq ? -1 : 0, .split = v ? -1 : 0, .direct = v ? 2 : 0,
                                .tag = v ? "direct (any size)" : "default");
                        }
    }
    if (b64split == 14) { /* session 26 --smallsplit (use --size 2048): b128 at d 0.1 / 0.25 keeps the prep kernel for the
                             few-blocks split (session 17: 2048^3 skewed d 0.25 +10-12 % against no split, both with the
                             prep); direct mode, which cannot split, saves 10-19 % of such a call. The default (prep, split
                             L 8) against direct mode without the split, uniform and skewed, A B B A */
        for (int sk = 0; sk < 2; sk++)
            for (int di = 0; di < 2; di++)
                for (int r = 0; r < 4; r++) {
                    const int v = r == 1 || r == 2;
                    ADD(.b = 128, .d = ds[di], .skew = sk, .split = v ? -1 : 0, .direct = v ? 1 : 0,
                        .tag = v ? "direct, no split" : "default (prep, split)");
                }
    }
    if (b64split == 12) { /* session 24: a pair's stage loads one B panel per column of its two rows' union; rows matched by
                             shared columns (the prep kernel's mutual-best rounds) make unions 7-10 % smaller at 8192^3 and
                             12-20 % at the MoE shape (CPU model, uniform). Predicted: the pair +5-8 % at 8192^3 d 0.25 /
                             0.5, +10-15 % at the MoE shape; then the pair may beat the 64 x 512 default at d 0.25.
                             A B C C B A per point: adjacent pair, matched pair, the default dispatch. */
        /* run 2 (after the first: matched pairs level or slower, the MoE shape 2x slower from the prep kernel's matching):
           with and without the pattern cache, to separate the kernel's gain from the prep's cost */
        static const struct { int64_t m, n, k; double d; int sk, opt; } pt[7] = {
            {0, 0, 0, 0.10, 0, 0}, {0, 0, 0, 0.25, 0, 0}, {0, 0, 0, 0.50, 0, 0}, {0, 0, 0, 0.25, 1, 0},
            {32768, 4096, 4096, 0.10, 0, 0}, {32768, 4096, 4096, 0.50, 0, 0}, {0, 0, 0, 0.50, 0, 1}};
        static const char *tg[4] = {"pair", "pair matched", "pair, cached", "pair matched, cached"};
        if (pairmatch == 1)
            for (int q = 0; q < 7; q++)
                for (int r = 0; r < 8; r++) {
                    const int v = r < 4 ? r : 7 - r;
                    ADD(.b = 64, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k, .opt = pt[q].opt,
                        .b64m = 2, .pm = v & 1 ? 1 : -1, .cache = v >= 2, .tag = tg[v]);
                }
        /* --pairmatch2 (run 3): with the lists cached, the default dispatch (the 64 x 512 tile below d 0.375) against the
           matched pair where the tile is the default, A B B A */
        static const struct { int64_t m, n, k; double d; int sk, opt; } pu[7] = {
            {0, 0, 0, 0.10, 0, 0}, {0, 0, 0, 0.25, 0, 0}, {0, 0, 0, 0.10, 1, 0}, {0, 0, 0, 0.25, 1, 0},
            {32768, 4096, 4096, 0.10, 0, 0}, {32768, 4096, 4096, 0.25, 0, 0}, {0, 0, 0, 0.25, 0, 1}};
        if (pairmatch == 2)
            for (int q = 0; q < 7; q++)
                for (int r = 0; r < 4; r++) {
                    const int v = r == 1 || r == 2;
                    ADD(.b = 64, .d = pu[q].d, .skew = pu[q].sk, .m = pu[q].m, .n = pu[q].n, .k = pu[q].k, .opt = pu[q].opt,
                        .b64m = v ? 2 : 0, .pm = v ? 1 : -1, .cache = 1, .tag = v ? "pair matched, cached" : "default, cached");
                }
        /* --pairmatch3 (session 25): the windowed matching (candidates within 16 rows: a few us of prep; CPU model:
           unions -8.3 / -6.7 / -5.4 % at 8192^3 d 0.1 / 0.25 / 0.5, -11.7 / -10.1 / -6.9 % at the MoE shape, vs the
           full matching's -10.7 / -8.5 / -7.5 and -19.0 / -15.8 / -10.8) on lists rebuilt by every call. Predicted:
           +3-5 % over adjacent rows at 8192^3 d 0.25 / 0.5, +5-10 % at the MoE shape. A B C D D C B A per point:
           adjacent pair uncached, windowed pair uncached, full-matched pair cached (the bound), the default dispatch
           uncached. */
        /* the points where a pair is (or may become) the uncached default at 8192^3 (d 0.1 stays with the 64 x 512
           tile there; with --size 2048, where the pair is the default at every density, d 0.1 is the case to watch) */
        static const struct { int64_t m, n, k; double d; int sk; } pw[6] = {
            {0, 0, 0, 0.10, 0}, {0, 0, 0, 0.25, 0}, {0, 0, 0, 0.50, 0}, {0, 0, 0, 0.50, 1}, {32768, 4096, 4096, 0.25, 0},
            {32768, 4096, 4096, 0.50, 0}};
        static const struct { int b64m, pm, cache; const char *tag; } vw[4] = {
            {2, -1, 0, "pair"}, {2, 2, 0, "pair windowed"}, {2, 1, 1, "pair matched, cached"}, {0, 0, 0, "default"}};
        if (pairmatch == 3)
            for (int q = 0; q < 6; q++)
                for (int r = 0; r < 8; r++) {
                    const int v = r < 4 ? r : 7 - r;
                    ADD(.b = 64, .d = pw[q].d, .skew = pw[q].sk, .m = pw[q].m, .n = pw[q].n, .k = pw[q].k,
                        .b64m = vw[v].b64m, .pm = vw[v].pm, .cache = vw[v].cache, .tag = vw[v].tag);
                }
        /* --pairmatch4 (session 25, for the H200, where the 64 x 512 tile led the matched pair at d 0.25 by 2-8 %): where the
           two cross above d 0.25, lists cached, A B B A (64 x 512 tile forced, matched pair forced) */
        static const struct { int64_t m, n, k; double d; int sk, opt; } pv[8] = {
            {0, 0, 0, 0.30, 0, 0}, {0, 0, 0, 0.375, 0, 0}, {0, 0, 0, 0.50, 0, 0}, {0, 0, 0, 0.375, 1, 0},
            {32768, 4096, 4096, 0.375, 0, 0}, {32768, 4096, 4096, 0.50, 0, 0}, {0, 0, 0, 0.375, 0, 1}, {0, 0, 0, 0.50, 0, 1}};
        if (pairmatch == 4)
            for (int q = 0; q < 8; q++)
                for (int r = 0; r < 4; r++) {
                    const int v = r == 1 || r == 2;
                    ADD(.b = 64, .d = pv[q].d, .skew = pv[q].sk, .m = pv[q].m, .n = pv[q].n, .k = pv[q].k, .opt = pv[q].opt,
                        .b64w = v ? 0 : 256, .b64m = v ? 2 : 0, .pm = v ? 1 : -1, .cache = 1,
                        .tag = v ? "pair matched, cached" : "64x512, cached");
                }
    }
    if (b64split == 10) { /* session 23, H100: b128 skewed d 0.1 reads 557 MB of DRAM vs 209 MB uniform. With one group of
                             half the tiles per partition queue the class bands (longest first) each sweep the partition's
                             16 B columns (64 MB, more than its half of L2): B is read about once per class band. Tile
                             groups cut that but start the last group's long rows late (a tail of ~30 %, --skew128).
                             Long units first (part_long k: >= pow2ceil(k x mean) blocks) over all the partition's tiles,
                             then the rest in groups of G tiles: the long rows start at once, the short ones sweep B once.
                             Predicted: b128 skewed d 0.1 +10-20 % on the H100 (DRAM-bound), uniform untouched (no
                             partition queues there). A B C .. C B A per point. */
        static const struct { int b; int64_t m, n, k; double d; int sk; } pt[5] = {
            {128, 0, 0, 0, 0.10, 1}, {128, 0, 0, 0, 0.25, 1}, {128, 32768, 4096, 4096, 0.10, 1}, {64, 0, 0, 0, 0.10, 1},
            {128, 0, 0, 0, 0.10, 0}};
        static const struct { int plong, ptg; const char *tag; } va[6] = {
            {0, 0, "default"}, {4, 4, "long x4, groups of 4"}, {2, 4, "long x2, groups of 4"},
            {4, 8, "long x4, groups of 8"}, {2, 2, "long x2, groups of 2"}, {8, 4, "long x8, groups of 4"}};
        for (int q = 0; q < 5; q++)
            for (int r = 0; r < 12; r++) {
                const int v = r < 6 ? r : 11 - r;
                if (q == 4 && v > 2) continue; /* uniform: no partition queues, must not move */
                /* b64 (the 64 x 512 tile: one tile per group and the long-row split by default): long first on top */
                const int ptg = pt[q].b == 64 ? 0 : va[v].ptg;
                ADD(.b = pt[q].b, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k,
                    .ptg = ptg, .plong = va[v].plong, .tag = va[v].tag);
            }
    }
    if (b64split == 9) { /* session 23, H100 ncu (--skewb64): b128 8192^3 skewed d 0.1 reads 557 MB of DRAM vs 209 MB
                            uniform (L2 hit 58 vs 76 %, DRAM 83 % of peak), as b64 did before session 22's rule. b64's fix
                            (L 32, one tile per group) lost on b128: with 32 N tiles of 256 columns a CTA's share of the
                            work is ~100 block-times, so a long part that starts late in the run is a tail of ~30 %.
                            Hypothesis: groups of G tiles (G x 4 MB of B per partition fits its half of L2) and parts short
                            enough (L 8-16) that the last group's long parts end with the run. A B C .. C B A per point. */
        static const struct { int64_t m, n, k; double d; int sk; } pt[4] = {
            {0, 0, 0, 0.10, 1}, {0, 0, 0, 0.25, 1}, {32768, 4096, 4096, 0.10, 1}, {0, 0, 0, 0.10, 0}};
        static const struct { int split, ptg; const char *tag; } va[7] = {
            {0, 0, "default"}, {32, 4, "split 32, groups of 4"}, {16, 4, "split 16, groups of 4"},
            {16, 2, "split 16, groups of 2"}, {8, 2, "split 8, groups of 2"}, {8, 4, "split 8, groups of 4"},
            {16, 0, "split 16, half tiles"}};
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < 14; r++) {
                const int v = r < 7 ? r : 13 - r;
                if (q == 3 && v != 0 && v != 2 && v != 4) continue; /* uniform: the rule must not touch it */
                ADD(.b = 128, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k,
                    .ptg = va[v].ptg, .split = va[v].split, .tag = va[v].tag);
            }
    }
    if (b64split == 8) { /* session 22, H200 bench: MoE skewed b64 d 0.1 read 402 TFLOPS against session 20's 422 (other
                            runs). Same run: today's default, session 21's (no long-row rule, half-tile groups) and session
                            20's kernel (no split, no partition queues, no automatic L2 hints), A B C C B A */
        static const struct { int64_t m, n, k; double d; int sk; } pt[4] = {
            {32768, 4096, 4096, 0.10, 1}, {32768, 4096, 4096, 0.25, 1}, {0, 0, 0, 0.10, 1}, {32768, 4096, 4096, 0.10, 0}};
        static const char *tg[3] = {"default", "session 21 default", "session 20 kernel"};
        for (int q = 0; q < 4; q++)
            for (int r = 0; r < 6; r++) {
                const int v = r < 3 ? r : 5 - r;
                ADD(.b = 64, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k,
                    .ptg = v ? -1 : 0, .split = v == 1 ? -2 : v == 2 ? -1 : 0, .part = v == 2 ? -1 : 0,
                    .l2h = v == 2 ? -1 : 0, .tag = tg[v]);
            }
    }
    if (b64split == 7) { /* session 22, H100 --skewsplit: split L 32 + one N tile per group in each partition queue gave
                            b64 8192^3 skewed d 0.1 0.39 -> 0.50, d 0.25 +6 %, MoE +5 %. The rule (split -3: L = max(32,
                            2 x mean row)) and one tile per group against today's default and the two halves, b64 and
                            b128, A B C D D C B A per point; uniform rows must not move. */
        static const struct { int b; int64_t m, n, k; double d; int sk; } pt[7] = {
            {64, 0, 0, 0, 0.10, 1}, {64, 0, 0, 0, 0.25, 1}, {64, 32768, 4096, 4096, 0.10, 1}, {128, 0, 0, 0, 0.10, 1},
            {128, 0, 0, 0, 0.25, 1}, {64, 0, 0, 0, 0.10, 0}, {128, 32768, 4096, 4096, 0.10, 1}};
        static const char *tg[4] = {"default", "rule + groups of 1", "rule, half tiles", "no split, groups of 1"};
        for (int q = 0; q < 7; q++)
            for (int r = 0; r < 8; r++) {
                const int v = r < 4 ? r : 7 - r;
                if (q == 5 && (v == 3 || v == 2)) continue;
                ADD(.b = pt[q].b, .d = pt[q].d, .skew = pt[q].sk, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k,
                    .ptg = v == 2 ? -1 : v ? 1 : 0, .split = v == 1 || v == 2 ? -3 : v == 3 ? -1 : 0, .tag = tg[v]);
            }
    }
    if (b64split == 6) { /* session 22, H100 ncu (--skewb64): b64 skewed d 0.1 reads 921 MB of DRAM (B 7x over) vs 315 MB
                            uniform, and is DRAM-bound (84 % of peak). Hypothesis: a long row's B reads (its whole N-tile
                            column, one block per stage for up to 128 stages) come long after the short rows of the same
                            tile read those blocks, so they miss L2. Split long rows (parts run concurrently) and walk
                            one N tile at a time (per partition queue): a tile's reads fall in one short window. */
        static const struct { int64_t m, n, k; double d; } pt[3] = {{0, 0, 0, 0.10}, {0, 0, 0, 0.25}, {32768, 4096, 4096, 0.10}};
        static const char *tg[6] = {"default", "split 16, part off, tg 1", "split 16, part, groups of 1",
                                    "split 32, part, groups of 1", "split 16, part, groups of 2", "no split, part, groups of 1"};
        for (int q = 0; q < 3; q++)
            for (int r = 0; r < 12; r++) {
                const int v = r < 6 ? r : 11 - r;
                ADD(.b = 64, .d = pt[q].d, .skew = 1, .m = pt[q].m, .n = pt[q].n, .k = pt[q].k, .part = v == 1 ? -1 : 0,
                    .tg = v == 1 ? 1 : 0, .ptg = v == 2 || v == 3 || v == 5 ? 1 : v == 4 ? 2 : 0,
                    .split = v == 1 || v == 2 || v == 4 ? 16 : v == 3 ? 32 : v == 5 ? -1 : 0, .tag = tg[v]);
            }
        ADD(.b = 64, .d = 0.10, .tag = "uniform default");
        ADD(.b = 64, .d = 0.10, .part = 2, .ptg = 1, .tag = "uniform part forced, groups of 1");
    }
    if (b64split == 5) { /* session 22: b64 8192^3 skewed d 0.1 reads 0.70 of uniform on the H100, 0.88 on the H200 (same
                            code): DRAM bytes and L2 hit rate of each (--ncu), or the cycle accounting (--prof) */
        ADD(.b = 64, .d = 0.10, .tag = "uniform");
        ADD(.b = 64, .d = 0.10, .skew = 1, .tag = "skewed default");
        ADD(.b = 64, .d = 0.10, .skew = 1, .part = -1, .tg = 4, .tag = "skewed part off tg 4");
        ADD(.b = 64, .d = 0.10, .skew = 1, .part = -1, .split = -1, .tag = "skewed part off no split");
        ADD(.b = 64, .d = 0.25, .tag = "uniform");
        ADD(.b = 64, .d = 0.25, .skew = 1, .tag = "skewed default");
        /* session 23: b128 skewed d 0.1 reads 0.82 of uniform on the H100 (0.90 on the H200): the same question */
        ADD(.b = 128, .d = 0.10, .tag = "b128 uniform");
        ADD(.b = 128, .d = 0.10, .skew = 1, .tag = "b128 skewed default");
        ADD(.b = 128, .d = 0.10, .skew = 1, .split = -3, .ptg = -1, .tag = "b128 skewed rule, half tiles");
        ADD(.b = 128, .d = 0.10, .skew = 1, .plong = 2, .ptg = 4, .tag = "b128 skewed long x2, groups of 4");
        ADD(.b = 128, .d = 0.10, .skew = 1, .plong = 4, .ptg = 8, .tag = "b128 skewed long x4, groups of 8");
    }
    if (ncu && !skew && !s7 && !fabric && b64split != 5 && b64split != 11) { /* one call each, under the profiler */
        ADD(.b = 128, .d = 0.50, .tag = "ncu");
        ADD(.b = 128, .d = 0.10, .tag = "ncu");
        ADD(.b = 64, .d = 0.50, .tag = "ncu");
        ADD(.b = 128, .d = 0.50, .cluster = 1, .tag = "ncu cluster 3 st");
        ADD(.b = 128, .d = 0.50, .cluster = 3, .tag = "ncu cluster 4 st direct");
    }
#undef ADD

    static char table[256][240];
    int nt = 0;
    const int64_t M0 = M_, N0 = N_, K0 = K_;
    int64_t shp[3] = {M0, N0, K0};
    double shp_tf[2] = {dense_tf[0], dense_tf[1]};
    for (int ci = 0; ci < nc; ci++) {
        cfg c = cfgs[ci];
        /* another shape: its own cuBLAS baseline (fp16 and bf16, C in the input dtype), measured once per shape */
        M_ = c.m ? c.m : M0;
        N_ = c.m ? c.n : N0;
        K_ = c.m ? c.k : K0;
        if (M_ * K_ > (int64_t)nAK || K_ * N_ > (int64_t)nKN || M_ * N_ > (int64_t)nMN) continue;
        if (!ncu && (shp[0] != M_ || shp[1] != N_ || shp[2] != K_)) {
            shp[0] = M_;
            shp[1] = N_;
            shp[2] = K_;
            for (int bf = 0; bf < 2; bf++) {
                probe_fill_rand16(hbuf, (size_t)(M_ * K_), bf);
                CK(cudaMemcpy(dA, hbuf, (size_t)(M_ * K_) * 2, cudaMemcpyHostToDevice));
                probe_gemm_arg g = {h, M_, N_, K_, bf ? CUDA_R_16BF : CUDA_R_16F, bf ? CUDA_R_16BF : CUDA_R_16F, dA,
                                     dB[bf], dC};
                double mn, ms = time_it(probe_run_gemm, &g, &mn);
                shp_tf[bf] = c.m ? 2.0 * M_ * N_ * K_ / (ms * 1e-3) * 1e-12 : dense_tf[bf];
                printf("cuBLAS GemmEx %s dense %lldx%lldx%lld: %.3f ms  %.1f TFLOPS\n", bf ? "bf16" : "fp16",
                       (long long)M_, (long long)N_, (long long)K_, ms, shp_tf[bf]);
            }
            if (!c.m) shp_tf[0] = dense_tf[0], shp_tf[1] = dense_tf[1];
        }
        const size_t cAK = (size_t)(M_ * K_), cMN = (size_t)(M_ * N_);
        bsk__hopper_tune.b64_wgn = c.b64w;
        bsk__hopper_tune.slot_epi = c.slot;
        bsk__hopper_tune.band_mb = c.band;
        bsk__hopper_tune.no_pdl = c.nopdl;
        bsk__hopper_tune.bdesc_swap = c.bswap;
        bsk__hopper_tune.epi = c.epi;
        bsk__hopper_tune.classes = c.classes;
        bsk__hopper_tune.cluster = c.cluster;
        bsk__hopper_tune.b64_mode = c.b64m;
        bsk__hopper_tune.pf = c.pf;
        bsk__hopper_tune.max_ctas = c.maxc;
        bsk__hopper_tune.cl_acq = c.clacq;
        bsk__hopper_tune.l2hint = c.l2h;
        bsk__hopper_tune.ring4 = c.r4;
        bsk__hopper_tune.split = c.split;
        bsk__hopper_tune.tgroup = c.tg;
        bsk__hopper_tune.part_tg = c.ptg;
        bsk__hopper_tune.part_long = c.plong;
        bsk__hopper_tune.part_tab = c.part == 1 ? d_part : NULL;
        bsk__hopper_tune.part_mode = c.part == -1 ? -1 : c.part == 3 ? 2 : c.part == 4 ? 3 : c.part == 5 ? 4 : c.part >= 1 ? 1 : 0;
        bsk__hopper_tune.l2promo = c.promo;
        bsk__hopper_tune.fab = c.fab;
        bsk__hopper_tune.pair_match = c.pm;
        bsk__hopper_tune.direct = c.direct;
        const int di_ = c.d == 0.10 ? 0 : c.d == 0.25 ? 1 : c.d == 0.50 ? 2 : 3;
        const uint64_t seed = c.seed ? (uint64_t)c.seed : (uint64_t)(1000 + (c.b == 64) * 6 + di_ * 2 + c.skew);
        bsk_dtype dt = c.bf ? BSK_BF16 : BSK_F16, ct = c.c32 ? BSK_F32 : dt;
        if (c.opt && M_ != K_) continue; /* op T: square shapes only (the reference below) */
        bsk_bsr hA, A;
        CS(bsk_bsr_random(M_, K_, c.b, c.b, c.d, c.skew ? BSK_PATTERN_SKEWED : BSK_PATTERN_UNIFORM, seed, dt, &hA));
        bsk_bsr_stats st;
        CS(bsk_bsr_stats_get(&hA, &st));
        CS(bsk_bsr_clone(&hA, BSK_MEM_DEVICE, &A));
        bsk_dense B = {K_, N_, N_, dt, BSK_MEM_DEVICE, dB[c.bf]}, C = {M_, N_, N_, ct, BSK_MEM_DEVICE, dC};
        spmm_arg sa = {ctx, &A, &B, &C, c.opt ? BSK_OP_T : BSK_OP_N};
        CS(bsk_set_pattern_cache(ctx, c.cache)); /* a change drops every entry */
        if (ncu) {
            run_spmm(&sa);
            CS(bsk_synchronize(ctx));
            printf("ncu: b=%d d=%.2f %s %s kernel %s split L %d part %d\n", c.b, c.d, c.skew ? "skewed" : "uniform",
                   c.tag, bsk_last_kernel(ctx), bsk__hopper_tune.out_split_len, bsk__hopper_tune.out_part);
            bsk_bsr_free(&A);
            bsk_bsr_free(&hA);
            continue;
        }
        /* correctness at full size: cuBLAS on the densified A (fp32 out) vs bsk */
        CK(cudaMemset(dC, 0xff, cMN * 4)); /* NaN poison */
        run_spmm(&sa);
        CS(bsk_synchronize(ctx));
        const char *kern = bsk_last_kernel(ctx);
        bsk_dense hD = {M_, K_, K_, dt, BSK_MEM_HOST, hbuf};
        CS(bsk_bsr_to_dense(&hA, &hD));
        CK(cudaMemcpy(dA, hbuf, cAK * 2, cudaMemcpyHostToDevice));
        probe_gemm_arg g = {h, M_, N_, K_, c.bf ? CUDA_R_16BF : CUDA_R_16F, CUDA_R_32F, dA, dB[c.bf], dRef};
        if (c.opt) { /* row-major C = Aᵀ·B: column-major Cᵀ = Bᵀ·A, A's column-major view transposed (M = K) */
            const float one = 1.0f, zero = 0.0f;
            CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, (int)N_, (int)M_, (int)K_, &one, dB[c.bf], g.dt, (int)N_, dA,
                            g.dt, (int)K_, &zero, dRef, CUDA_R_32F, (int)N_, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        } else
            probe_run_gemm(&g);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hC32, dRef, cMN * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hC16, dC, cMN * (c.c32 ? 4 : 2), cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (size_t i = 0; i < cMN; i++) {
            double got = c.c32 ? (double)((float *)hC16)[i] : (double)(c.bf ? probe_bf2f(hC16[i]) : probe_h2f(hC16[i]));
            double r = hC32[i];
            num += (got - r) * (got - r);
            den += r * r;
        }
        double err = den > 0 ? sqrt(num / den) : sqrt(num);
        double mn, ms = time_it(run_spmm, &sa, &mn);
        double flop = 2.0 * (double)A.nnzb * c.b * c.b * (double)N_;
        double tf = flop / (ms * 1e-3) * 1e-12;
        double base = c.c32 ? dense_tf32 : c.m ? shp_tf[c.bf] : dense_tf[c.bf];
        char shape[48] = "";
        if (c.m) snprintf(shape, sizeof shape, " %lldx%lldx%lld", (long long)M_, (long long)N_, (long long)K_);
        const int pmo = bsk__hopper_tune.out_pair_match;
        const char *pmt = pmo == 2 ? ", windowed" : pmo ? ", matched" : "";
        snprintf(table[nt++], sizeof table[0], "%4d %5.2f %-7s %-4s %7lld %4lld %8.3f %8.3f %7.1f %6.3f %9.2e %-19s %s%s%s (grid %d, pf %d, split L %d, part %d%s, prep %d)",
                 c.b, c.d, c.skew ? "skewed" : "uniform", c.bf ? "bf16" : "fp16", (long long)A.nnzb, (long long)st.row_max,
                 ms, mn, tf, tf / base, err, kern, c.tag, c.opt ? " op T" : "", shape,
                 c.maxc ? c.maxc : bsk__hopper_tune.out_max_grid, bsk__hopper_tune.out_pf, bsk__hopper_tune.out_split_len,
                 bsk__hopper_tune.out_part, pmt, bsk__hopper_tune.out_prep);
        printf("%s\n", table[nt - 1]);
        if (prof) print_prof(&sa);
        if (prepprof) print_prep_prof(&sa, c.cache);
        fflush(stdout);
        if (c.cache) CS(bsk_forget_patterns(ctx)); /* before A's memory can be reused by the next pattern */
        bsk_bsr_free(&A);
        bsk_bsr_free(&hA);
    }
    printf("\n== summary (E = TFLOPS on kept blocks / cuBLAS dense %s: fp16 %.1f, bf16 %.1f TFLOPS)\n", info.name,
           dense_tf[0], dense_tf[1]);
    printf("   b     d pattern dt      nnzb rmax   med ms   min ms  TFLOPS      E   rel_err kernel             note\n");
    for (int i = 0; i < nt; i++) printf("%s\n", table[i]);
    bsk_destroy(ctx);
    cublasDestroy(h);
    return 0;
}
