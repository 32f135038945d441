/* spmm_mma.cu — portable tensor-core SpMM (sm_80+): mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate.

   C = alpha·op(A)·B + beta·C for block sizes that are multiples of 16. A work item is (list, M sub-tile,
   N tile): op N walks block row i (row_ptr), op T walks block column j through the transpose index
   (pattern_cache.cu) and uses each block transposed. The inner loop runs over (block, K chunk) steps; each
   step brings a BM x BK piece of the A block and the BK x BN panel of B (rows j*KB + kk.. — contiguous, no
   gather) into shared memory with cp.async, three stages deep, zero-filling whatever lies outside B or
   belongs to a skipped (malformed) block. Fragments come from ldmatrix (.trans for B, and for A under op T).
   Sums run in a fixed order: results are bitwise deterministic. */
#include <string.h>
#include "portable_common.cuh"

#define STAGES 3
#define PAD 8 /* halves of padding per shared row: ldmatrix rows land in distinct banks */

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
    static constexpr int A_ELEMS = TRANS ? BK * (BM + PAD) : BM * (BK + PAD);
    static constexpr int B_ELEMS = BK * (BN + PAD);
    static constexpr int STAGE_ELEMS = A_ELEMS + B_ELEMS;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE_ELEMS * sizeof(T);
};

template <typename T, int BM, int BN, int BK, int WM, int WN, bool TRANS>
__global__ void __launch_bounds__(mma_cfg<T, BM, BN, BK, WM, WN, TRANS>::THREADS)
spmm_mma_kernel(const spmm_args a)
{
    typedef mma_cfg<T, BM, BN, BK, WM, WN, TRANS> cfg;
    constexpr int MI = WM / 16, NI = WN / 8, WARPS_N = BN / WN;
    static_assert(NI % 2 == 0, "B fragments load in pairs of n8 tiles");
    extern __shared__ uint4 smem_raw[];
    T *smem = (T *)smem_raw;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const T *vals = (const T *)a.vals, *B = (const T *)a.B;
    const int64_t rowtiles = a.nlist * a.msub;
    const int kchunks = a.KB / BK;

    for (int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
        const int64_t rt = item % rowtiles, nt = item / rowtiles;
        const int64_t list = rt / a.msub;
        const int m0 = (int)(rt % a.msub) * BM;
        const int64_t n0 = nt * BN;
        int64_t p0 = 0, p1 = 0;
        if (a.ptr) bsk_range(a.ptr, list, a.nnzb, &p0, &p1);
        const int64_t steps = (p1 - p0) * kchunks;

        /* Issue the copies of the next step into stage `sg`. Steps are loaded strictly in order, so a cursor
           (block lp, chunk lk) replaces a 64-bit division per step. */
        int64_t lp = p0;
        int lk = 0;
        auto load = [&](int sg) {
            const int64_t p = lp;
            const int kk = lk;
            lk += BK;
            if (lk == a.KB) { lk = 0; lp++; }
            const int64_t jx = a.idx[p];
            const int64_t b = a.blk ? (int64_t)a.blk[p] : p;
            const bool ok = jx >= 0 && jx < a.nidx && b >= 0 && b < a.nnzb;
            const T *ablk = vals + (ok ? b : 0) * a.bsz;
            T *sA = smem + sg * cfg::STAGE_ELEMS, *sB = sA + cfg::A_ELEMS;
            if (!TRANS) {
                /* BM rows of the block (m0..), BK columns (kk..) */
                constexpr int CPR = BK / 8;
                for (int c = tid; c < BM * CPR; c += cfg::THREADS) {
                    int r = c / CPR, c8 = (c % CPR) * 8;
                    const T *src = ablk + (int64_t)(m0 + r) * a.bc + kk + c8;
                    bsk_cp_async16(bsk_smem_u32(sA + r * (BK + PAD) + c8), ok ? (const void *)src : &bsk_zero16,
                                   ok ? 16 : 0);
                }
            } else {
                /* BK rows of the block (kk..), BM columns (m0..): the block as stored, transposed at ldmatrix */
                constexpr int CPR = BM / 8;
                for (int c = tid; c < BK * CPR; c += cfg::THREADS) {
                    int r = c / CPR, c8 = (c % CPR) * 8;
                    const T *src = ablk + (int64_t)(kk + r) * a.bc + m0 + c8;
                    bsk_cp_async16(bsk_smem_u32(sA + r * (BM + PAD) + c8), ok ? (const void *)src : &bsk_zero16,
                                   ok ? 16 : 0);
                }
            }
            constexpr int CPRB = BN / 8;
            const int64_t krow0 = (ok ? jx : 0) * a.KB + kk;
            for (int c = tid; c < BK * CPRB; c += cfg::THREADS) {
                int r = c / CPRB, c8 = (c % CPRB) * 8;
                int64_t grow = krow0 + r, gcol = n0 + c8;
                int64_t left = a.N - gcol;
                int bytes = (ok && grow < a.K && left > 0) ? (left >= 8 ? 16 : (int)left * 2) : 0;
                const void *src = bytes ? (const void *)(B + grow * a.ldb + gcol) : (const void *)&bsk_zero16;
                bsk_cp_async16(bsk_smem_u32(sB + r * (BN + PAD) + c8), src, bytes);
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

template <typename T, int BM, int BN, int BK, int WM, int WN, bool TRANS>
static bsk_status launch_cfg(bsk_context *ctx, const spmm_args &a)
{
    typedef mma_cfg<T, BM, BN, BK, WM, WN, TRANS> cfg;
    struct bsk_cuda_state *st = ctx->cuda;
    if (cfg::SMEM > st->smem_optin) return BSK_ERR_UNSUPPORTED;
    void (*k)(const spmm_args) = spmm_mma_kernel<T, BM, BN, BK, WM, WN, TRANS>;
    if (cfg::SMEM > 48 * 1024) {
        bsk_status s = bsk_cuda_status(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg::SMEM));
        if (s) return s;
    }
    k<<<bsk_grid_for(a.items), cfg::THREADS, cfg::SMEM, (cudaStream_t)ctx->stream>>>(a);
    return BSK_CUDA_LAUNCH_CHECK();
}

/* Pick the M tile from the output rows per list (MB) and the K chunk from the inner extent (KB). */
template <typename T, bool TRANS>
static bsk_status launch_bm(bsk_context *ctx, spmm_args &a, int BM)
{
    const bool k32 = a.KB % 32 == 0;
    a.msub = a.MB / BM;
    a.items = a.nlist * a.msub * a.ntiles;
    switch (BM) {
    case 128: return k32 ? launch_cfg<T, 128, 128, 32, 32, 64, TRANS>(ctx, a) : launch_cfg<T, 128, 128, 16, 32, 64, TRANS>(ctx, a);
    case 64: return k32 ? launch_cfg<T, 64, 128, 32, 32, 64, TRANS>(ctx, a) : launch_cfg<T, 64, 128, 16, 32, 64, TRANS>(ctx, a);
    case 32: return k32 ? launch_cfg<T, 32, 128, 32, 32, 32, TRANS>(ctx, a) : launch_cfg<T, 32, 128, 16, 32, 32, TRANS>(ctx, a);
    default: return k32 ? launch_cfg<T, 16, 128, 32, 16, 32, TRANS>(ctx, a) : launch_cfg<T, 16, 128, 16, 16, 32, TRANS>(ctx, a);
    }
}

bsk_status bsk_portable_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B,
                             float beta, bsk_dense *C)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major < 8) return BSK_ERR_UNSUPPORTED;
    if (A->dtype != BSK_F16 && A->dtype != BSK_BF16) return BSK_ERR_UNSUPPORTED;
    if (A->block_rows % 16 || A->block_cols % 16) return BSK_ERR_UNSUPPORTED;
    /* 16-byte copies need 16-byte aligned rows; anything else goes to the SIMT kernel */
    if (B->ld % 8 || !bsk_aligned16(B->data) || (A->nnzb && !bsk_aligned16(A->values))) return BSK_ERR_UNSUPPORTED;

    spmm_args a;
    memset(&a, 0, sizeof a);
    const bool trans = op == BSK_OP_T;
    bsk_spmm_args_fill(a, op, A, B, C);
    a.ntiles = (a.N + 127) / 128;
    a.alpha = alpha;
    a.beta = beta;
    a.cdt = C->dtype;
    size_t cs = bsk_dtype_size(C->dtype);
    a.cpair = C->ld % 2 == 0 && ((uintptr_t)C->data % (2 * cs)) == 0;
    const int BM = a.MB % 128 == 0 ? 128 : a.MB % 64 == 0 ? 64 : a.MB % 32 == 0 ? 32 : 16;

    bsk_tindex ti = {NULL, NULL, NULL, -1, NULL};
    if (trans) {
        bsk_status s = bsk_cuda_tindex_get(ctx, A, &ti);
        if (s) return s;
        a.ptr = ti.t_ptr;
        a.idx = ti.t_row;
        a.blk = ti.t_blk;
    } else {
        a.ptr = A->row_ptr;
        a.idx = A->col_idx;
    }
    bsk_status s;
    if (A->dtype == BSK_F16)
        s = trans ? launch_bm<__half, true>(ctx, a, BM) : launch_bm<__half, false>(ctx, a, BM);
    else
        s = trans ? launch_bm<__nv_bfloat16, true>(ctx, a, BM) : launch_bm<__nv_bfloat16, false>(ctx, a, BM);
    if (trans) bsk_cuda_tindex_done(ctx, &ti);
    if (!s) ctx->last_kernel = trans ? "cuda-mma-t" : "cuda-mma";
    return s;
}
