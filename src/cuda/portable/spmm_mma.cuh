/* spmm_mma.cuh — the portable tensor-core SpMM kernel (sm_80+): mma.sync m16n8k16, fp16/bf16 in, fp32
   accumulate. Included by spmm_mma.cu (op N, and the entry point) and spmm_mma_t.cu (op T), so the two
   sets of template instances compile in parallel.

   C = alpha·op(A)·B + beta·C for block sizes that are multiples of 16. A work item is (list, M sub-tile,
   N tile): op N walks block row i (row_ptr), op T walks block column j through the transpose index
   (pattern_cache.cu) and uses each block transposed. The inner loop runs over steps of BK inner elements:
   a BK-chunk of one block (G = 1, blocks with KB >= BK), or G whole blocks side by side (G = BK / KB, for
   16- and 32-wide blocks, so a step carries enough work to amortise its barrier). Each step brings the
   BM x BK piece of A and the BK x BN panel of B (rows j*KB.. of each block's column — contiguous, no gather)
   into shared memory with cp.async, three stages deep, zero-filling whatever lies outside B, past the
   list's end, or belongs to a skipped (malformed) block. The block indices of the next group are fetched
   one group ahead, so issuing copies never waits on a dependent global load. Fragments come from ldmatrix
   (.trans for B, and for A under op T). Sums run in a fixed order: results are bitwise deterministic. */
#ifndef BSK_SPMM_MMA_CUH
#define BSK_SPMM_MMA_CUH

#include <string.h>
#include "portable_common.cuh"

#define SPMM_STAGES 3
#define SPMM_PAD 8 /* halves of padding per shared row: ldmatrix rows land in distinct banks */

struct spmm_args {
    const int32_t *ptr;  /* op N: row_ptr; op T: t_ptr (NULL: every list empty) */
    const int32_t *idx;  /* op N: col_idx (block column); op T: t_row (block row) */
    const int32_t *blk;  /* op T: t_blk (index into values); op N: NULL (block p is values[p]) */
    const void *vals;
    const void *B;
    void *C;
    int64_t ldb, ldc;
    int64_t M, K, N;     /* C is M x N, B is K x N */
    int64_t nlist;       /* block rows (N) or block columns (T) */
    int64_t nidx;        /* idx values must lie in [0, nidx) */
    int64_t nnzb;
    int64_t bsz;         /* br * bc */
    int32_t bc;          /* row length inside a block */
    int32_t MB, KB;      /* output rows per list, inner extent per block */
    int64_t msub, ntiles, items;
    float alpha, beta;
    int cdt, cpair;
};

template <typename T, int BM, int BN, int BK, int WM, int WN, bool TRANS>
struct mma_cfg {
    static constexpr int WARPS = (BM / WM) * (BN / WN);
    static constexpr int THREADS = WARPS * 32;
    static constexpr int A_ELEMS = TRANS ? BK * (BM + SPMM_PAD) : BM * (BK + SPMM_PAD);
    static constexpr int B_ELEMS = BK * (BN + SPMM_PAD);
    static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
    static constexpr size_t SMEM = (size_t)SPMM_STAGES * STAGE_ELEMS * sizeof(T);
};

template <typename T, int BM, int BN, int BK, int G, int WM, int WN, bool TRANS>
__global__ void __launch_bounds__(mma_cfg<T, BM, BN, BK, WM, WN, TRANS>::THREADS)
spmm_mma_kernel(const spmm_args a)
{
    typedef mma_cfg<T, BM, BN, BK, WM, WN, TRANS> cfg;
    constexpr int MI = WM / 16, NI = WN / 8, WARPS_N = BN / WN, STAGES = SPMM_STAGES, PAD = SPMM_PAD;
    constexpr int KBG = BK / G; /* G > 1: the blocks' inner extent (the host checked KB == BK / G) */
    static_assert(NI % 2 == 0, "B fragments load in pairs of n8 tiles");
    static_assert(BK % G == 0 && KBG % 16 == 0, "a step holds whole 16-wide pieces");
    extern __shared__ uint4 smem_raw[];
    T *smem = (T *)smem_raw;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const T *vals = (const T *)a.vals, *B = (const T *)a.B;
    const int64_t rowtiles = a.nlist * a.msub;

    for (int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
        const int64_t rt = item % rowtiles, nt = item / rowtiles;
        const int64_t list = rt / a.msub;
        const int m0 = (int)(rt % a.msub) * BM;
        const int64_t n0 = nt * BN;
        int64_t p0 = 0, p1 = 0;
        if (a.ptr) bsk_range(a.ptr, list, a.nnzb, &p0, &p1);
        const int64_t nblk = p1 - p0;
        const int kchunks = G == 1 ? a.KB / BK : 1;
        const int64_t steps = G == 1 ? nblk * kchunks : (nblk + G - 1) / G;

        /* Load cursor: group start lp, chunk lk (G == 1). cj/cb: raw indices of the group at lp; nj/nb: of
           the group after it, already in flight. Past p1 the index reads as -1 (a zero-filled block). */
        int64_t lp = p0;
        int lk = 0;
        int64_t cj[G], cb[G], nj[G], nb[G];
        auto fetch = [&](int64_t p, int64_t *j, int64_t *b) {
#pragma unroll
            for (int u = 0; u < G; u++) {
                const int64_t pq = p + u;
                j[u] = pq < p1 ? (int64_t)a.idx[pq] : -1;
                b[u] = pq < p1 ? (a.blk ? (int64_t)a.blk[pq] : pq) : 0;
            }
        };
        if (steps > 0) {
            fetch(p0, cj, cb);
            fetch(p0 + G, nj, nb);
        }

        /* Issue the copies of the next step into stage `sg`. Steps are loaded strictly in order. */
        auto load = [&](int sg) {
            T *sA = smem + sg * cfg::STAGE_ELEMS, *sB = sA + cfg::A_ELEMS;
            if (!TRANS) {
                /* BM rows of the block(s) (m0..), BK inner columns */
                constexpr int CPR = BK / 8;
                for (int c = tid; c < BM * CPR; c += cfg::THREADS) {
                    const int r = c / CPR, c8 = (c % CPR) * 8;
                    const int q = G == 1 ? 0 : c8 / KBG, kin = G == 1 ? lk + c8 : c8 % KBG;
                    int64_t jq = cj[0], bq = cb[0];
#pragma unroll
                    for (int u = 1; u < G; u++)
                        if (q == u) { jq = cj[u]; bq = cb[u]; }
                    const bool ok = jq >= 0 && jq < a.nidx && bq >= 0 && bq < a.nnzb;
                    const T *src = vals + (ok ? bq : 0) * a.bsz + (int64_t)(m0 + r) * a.bc + kin;
                    bsk_cp_async16(bsk_smem_u32(sA + r * (BK + PAD) + c8), ok ? (const void *)src : &bsk_zero16,
                                   ok ? 16 : 0);
                }
            } else {
                /* BK inner rows of the block(s), BM columns (m0..): stored as is, transposed at ldmatrix */
                constexpr int CPR = BM / 8;
                for (int c = tid; c < BK * CPR; c += cfg::THREADS) {
                    const int r = c / CPR, c8 = (c % CPR) * 8;
                    const int q = G == 1 ? 0 : r / KBG, kin = G == 1 ? lk + r : r % KBG;
                    int64_t jq = cj[0], bq = cb[0];
#pragma unroll
                    for (int u = 1; u < G; u++)
                        if (q == u) { jq = cj[u]; bq = cb[u]; }
                    const bool ok = jq >= 0 && jq < a.nidx && bq >= 0 && bq < a.nnzb;
                    const T *src = vals + (ok ? bq : 0) * a.bsz + (int64_t)kin * a.bc + m0 + c8;
                    bsk_cp_async16(bsk_smem_u32(sA + r * (BM + PAD) + c8), ok ? (const void *)src : &bsk_zero16,
                                   ok ? 16 : 0);
                }
            }
            /* B: inner row r is row kin of block q's panel, i.e. row jq*KB + kin of B */
            constexpr int CPRB = BN / 8;
            for (int c = tid; c < BK * CPRB; c += cfg::THREADS) {
                const int r = c / CPRB, c8 = (c % CPRB) * 8;
                const int q = G == 1 ? 0 : r / KBG, kin = G == 1 ? lk + r : r % KBG;
                int64_t jq = cj[0], bq = cb[0];
#pragma unroll
                for (int u = 1; u < G; u++)
                    if (q == u) { jq = cj[u]; bq = cb[u]; }
                const bool ok = jq >= 0 && jq < a.nidx && bq >= 0 && bq < a.nnzb;
                const int64_t grow = (ok ? jq : 0) * a.KB + kin, gcol = n0 + c8, left = a.N - gcol;
                const int bytes = (ok && grow < a.K && left > 0) ? (left >= 8 ? 16 : (int)left * 2) : 0;
                const void *src = bytes ? (const void *)(B + grow * a.ldb + gcol) : (const void *)&bsk_zero16;
                bsk_cp_async16(bsk_smem_u32(sB + r * (BN + PAD) + c8), src, bytes);
            }
            /* advance the cursor; on a new group, take the prefetched indices and fetch the next ones */
            bool next_group = true;
            if (G == 1) {
                lk += BK;
                next_group = lk == a.KB;
                if (next_group) lk = 0;
            }
            if (next_group) {
                lp += G;
#pragma unroll
                for (int u = 0; u < G; u++) { cj[u] = nj[u]; cb[u] = nb[u]; }
                fetch(lp + G, nj, nb);
            }
        };

        float acc[MI][NI][4];
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < steps) load(s);
            bsk_cp_async_commit();
        }
        int cs = 0; /* stage of step st */
        for (int64_t st = 0; st < steps; st++) {
            bsk_cp_async_wait<STAGES - 2>();
            __syncthreads(); /* step st is in shared memory for all; stage (st-1)%STAGES is free */
            if (st + STAGES - 1 < steps) load(cs + STAGES - 1 - (cs > 0 ? STAGES : 0)); /* (cs-1) mod STAGES */
            bsk_cp_async_commit();

            const T *sA = smem + cs * cfg::STAGE_ELEMS, *sB = sA + cfg::A_ELEMS;
            cs = cs == STAGES - 1 ? 0 : cs + 1;
            const int q = lane >> 3, r8 = lane & 7;
#pragma unroll
            for (int ks = 0; ks < BK; ks += 16) {
                uint32_t af[MI][4], bf[NI][2];
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const int mb0 = wm * WM + i * 16;
                    if (!TRANS) {
                        /* matrices: (m 0-7,k 0-7) (m 8-15,k 0-7) (m 0-7,k 8-15) (m 8-15,k 8-15) */
                        const T *p = sA + (mb0 + r8 + 8 * (q & 1)) * (BK + PAD) + ks + 8 * (q >> 1);
                        bsk_ldsm_x4(af[i], bsk_smem_u32(p));
                    } else {
                        /* stored [k][m]: same four matrices, each read transposed */
                        const T *p = sA + (ks + r8 + 8 * (q >> 1)) * (BM + PAD) + mb0 + 8 * (q & 1);
                        bsk_ldsm_x4_t(af[i], bsk_smem_u32(p));
                    }
                }
#pragma unroll
                for (int j = 0; j < NI; j += 2) {
                    /* stored [k][n]: (k 0-7,n 0-7) (k 8-15,n 0-7) (k 0-7,n 8-15) (k 8-15,n 8-15), transposed */
                    const T *p = sB + (ks + r8 + 8 * (q & 1)) * (BN + PAD) + wn * WN + j * 8 + 8 * (q >> 1);
                    uint32_t r[4];
                    bsk_ldsm_x4_t(r, bsk_smem_u32(p));
                    bf[j][0] = r[0];
                    bf[j][1] = r[1];
                    bf[j + 1][0] = r[2];
                    bf[j + 1][1] = r[3];
                }
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int j = 0; j < NI; j++) bsk_mma16816(acc[i][j], af[i], bf[j], T());
            }
        }
        bsk_cp_async_wait<0>();
        __syncthreads(); /* the next item's prologue overwrites the stages */

        /* epilogue: rows >= M and columns >= N are not written; beta == 0 never reads C */
        const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t grow = list * a.MB + m0 + wm * WM + i * 16 + g + 8 * h;
                if (grow >= a.M) continue;
#pragma unroll
                for (int j = 0; j < NI; j++) {
                    const int64_t gcol = n0 + wn * WN + j * 8 + 2 * t4;
                    const int64_t off = grow * a.ldc + gcol;
                    float v0 = a.alpha * acc[i][j][2 * h], v1 = a.alpha * acc[i][j][2 * h + 1];
                    if (a.cpair && gcol + 1 < a.N) {
                        if (a.beta != 0.0f) {
                            float2 o = bsk_dload2(a.C, a.cdt, off);
                            v0 += a.beta * o.x;
                            v1 += a.beta * o.y;
                        }
                        bsk_dstore2(a.C, a.cdt, off, v0, v1);
                    } else {
                        if (gcol < a.N) {
                            if (a.beta != 0.0f) v0 += a.beta * bsk_dload(a.C, a.cdt, off);
                            bsk_dstore(a.C, a.cdt, off, v0);
                        }
                        if (gcol + 1 < a.N) {
                            if (a.beta != 0.0f) v1 += a.beta * bsk_dload(a.C, a.cdt, off + 1);
                            bsk_dstore(a.C, a.cdt, off + 1, v1);
                        }
                    }
                }
            }
    }
}

template <typename T, int BM, int BN, int BK, int G, int WM, int WN, bool TRANS>
static bsk_status spmm_mma_launch_cfg(bsk_context *ctx, const spmm_args &a)
{
    typedef mma_cfg<T, BM, BN, BK, WM, WN, TRANS> cfg;
    if (cfg::SMEM > ctx->cuda->smem_optin) return BSK_ERR_UNSUPPORTED;
    void (*k)(const spmm_args) = spmm_mma_kernel<T, BM, BN, BK, G, WM, WN, TRANS>;
    if (cfg::SMEM > 48 * 1024) {
        bsk_status s = bsk_cuda_status(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg::SMEM));
        if (s) return s;
    }
    k<<<bsk_grid_for(a.items), cfg::THREADS, cfg::SMEM, (cudaStream_t)ctx->stream>>>(a);
    return BSK_CUDA_LAUNCH_CHECK();
}

/* The step shape from the inner extent per block (KB): 64-wide chunks of big blocks, 2 or 4 whole blocks
   of 32- or 16-wide ones, 16-wide chunks otherwise (48, 80, 96, ...). */
template <typename T, int BM, int WM, int WN, bool TRANS>
static bsk_status spmm_mma_launch_k(bsk_context *ctx, const spmm_args &a)
{
    if (a.KB % 64 == 0) return spmm_mma_launch_cfg<T, BM, 128, 64, 1, WM, WN, TRANS>(ctx, a);
    if (a.KB == 32) return spmm_mma_launch_cfg<T, BM, 128, 64, 2, WM, WN, TRANS>(ctx, a);
    if (a.KB == 16) return spmm_mma_launch_cfg<T, BM, 128, 64, 4, WM, WN, TRANS>(ctx, a);
    return spmm_mma_launch_cfg<T, BM, 128, 16, 1, WM, WN, TRANS>(ctx, a);
}

/* The M tile from the output rows per list (MB): a.msub and a.items must already match it. */
template <typename T, bool TRANS>
static bsk_status spmm_mma_launch(bsk_context *ctx, const spmm_args &a, int BM)
{
    switch (BM) {
    case 128: return spmm_mma_launch_k<T, 128, 32, 64, TRANS>(ctx, a);
    case 64: return spmm_mma_launch_k<T, 64, 32, 64, TRANS>(ctx, a);
    case 32: return spmm_mma_launch_k<T, 32, 32, 32, TRANS>(ctx, a);
    default: return spmm_mma_launch_k<T, 16, 16, 32, TRANS>(ctx, a);
    }
}

/* op T instances live in spmm_mma_t.cu */
bsk_status bsk__portable_spmm_launch_t(bsk_context *ctx, const spmm_args &a, int BM, bsk_dtype dt);

#endif
