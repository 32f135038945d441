/* sddmm_mma.cu — portable tensor-core SDDMM (sm_80+): out.values = alpha·(X·Yᵀ) on out's blocks + beta·out.
   A work item is one BM x BN piece of one output block (block sizes multiples of 16). X rows i*br.. and
   Y rows j*bc.. are both row-major with D contiguous, which is exactly mma's row-major A and col-major B:
   both fragments come from plain ldmatrix. D runs in chunks of 32 through a three-stage cp.async pipeline;
   rows past M / K and columns past D are zero-filled, never read. Padding entries of partial blocks are
   written as 0. */
#include <string.h>
#include "portable_common.cuh"

#define STAGES 3
#define BK 32
#define PAD 8

struct sddmm_args {
    const int32_t *row_ptr, *col_idx;
    const void *X, *Y;
    void *V;
    int64_t ldx, ldy, M, K, D, mb, nb, nnzb, bsz;
    int32_t br, bc;
    int64_t tn, tiles, items;
    float alpha, beta;
    int vdt, vpair;
};

template <int BM, int BN, int WM, int WN>
struct sd_cfg {
    static constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    static constexpr int X_ELEMS = BM * (BK + PAD), STAGE_ELEMS = (BM + BN) * (BK + PAD);
};

template <typename T, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(sd_cfg<BM, BN, WM, WN>::THREADS) sddmm_mma_kernel(const sddmm_args a)
{
    typedef sd_cfg<BM, BN, WM, WN> cfg;
    constexpr int MI = WM / 16, NI = WN / 8, WARPS_N = BN / WN, CPR = BK / 8;
    static_assert(NI % 2 == 0, "B fragments load in pairs of n8 tiles");
    __shared__ __align__(16) T smem[STAGES * cfg::STAGE_ELEMS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const T *X = (const T *)a.X, *Y = (const T *)a.Y;
    const int64_t steps = (a.D + BK - 1) / BK;

    for (int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
        const int64_t p = item / a.tiles, tile = item % a.tiles;
        const int m0 = (int)(tile / a.tn) * BM, c0 = (int)(tile % a.tn) * BN;
        const int64_t jx = a.col_idx[p];
        if (jx < 0 || jx >= a.nb) continue; /* malformed: leave the block alone (uniform over the CTA) */
        const int64_t ib = bsk_row_of(a.row_ptr, a.mb, a.nnzb, p);
        const int64_t xr0 = ib * a.br + m0, yr0 = jx * a.bc + c0;

        auto load = [&](int sg, int64_t st) {
            const int64_t d0 = st * BK;
            T *sX = smem + sg * cfg::STAGE_ELEMS, *sY = sX + cfg::X_ELEMS;
            for (int c = tid; c < (BM + BN) * CPR; c += cfg::THREADS) {
                const int r = c / CPR, c8 = (c % CPR) * 8;
                const bool isx = r < BM;
                const int rr = isx ? r : r - BM;
                const int64_t grow = (isx ? xr0 : yr0) + rr, lim = isx ? a.M : a.K, dcol = d0 + c8, left = a.D - dcol;
                const int bytes = (grow < lim && left > 0) ? (left >= 8 ? 16 : (int)left * 2) : 0;
                const void *src = bytes ? (const void *)((isx ? X + grow * a.ldx : Y + grow * a.ldy) + dcol)
                                        : (const void *)&bsk_zero16;
                bsk_cp_async16(bsk_smem_u32((isx ? sX : sY) + rr * (BK + PAD) + c8), src, bytes);
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
            if (s < steps) load(s, s);
            bsk_cp_async_commit();
        }
        for (int64_t st = 0; st < steps; st++) {
            bsk_cp_async_wait<STAGES - 2>();
            __syncthreads();
            const int64_t nx = st + STAGES - 1;
            if (nx < steps) load((int)(nx % STAGES), nx);
            bsk_cp_async_commit();
            const T *sX = smem + (int)(st % STAGES) * cfg::STAGE_ELEMS, *sY = sX + cfg::X_ELEMS;
            const int q = lane >> 3, r8 = lane & 7;
#pragma unroll
            for (int ks = 0; ks < BK; ks += 16) {
                uint32_t af[MI][4], bf[NI][2];
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const T *ptr = sX + (wm * WM + i * 16 + r8 + 8 * (q & 1)) * (BK + PAD) + ks + 8 * (q >> 1);
                    bsk_ldsm_x4(af[i], bsk_smem_u32(ptr));
                }
#pragma unroll
                for (int j = 0; j < NI; j += 2) {
                    /* stored [n][k]: (n 0-7,k 0-7) (n 0-7,k 8-15) (n 8-15,k 0-7) (n 8-15,k 8-15) */
                    const T *ptr = sY + (wn * WN + j * 8 + r8 + 8 * (q >> 1)) * (BK + PAD) + ks + 8 * (q & 1);
                    uint32_t r[4];
                    bsk_ldsm_x4(r, bsk_smem_u32(ptr));
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
        __syncthreads();

        const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = m0 + wm * WM + i * 16 + g + 8 * h;
                const bool rin = ib * a.br + r < a.M;
#pragma unroll
                for (int j = 0; j < NI; j++) {
                    const int c = c0 + wn * WN + j * 8 + 2 * t4;
                    const int64_t off = p * a.bsz + (int64_t)r * a.bc + c;
                    const bool in0 = rin && jx * a.bc + c < a.K, in1 = rin && jx * a.bc + c + 1 < a.K;
                    float v0 = 0.0f, v1 = 0.0f; /* padding is written as 0 */
                    if (a.vpair) {
                        if (in0 || in1) {
                            float2 o = make_float2(0.0f, 0.0f);
                            if (a.beta != 0.0f) o = bsk_dload2(a.V, a.vdt, off);
                            if (in0) v0 = a.alpha * acc[i][j][2 * h] + a.beta * o.x;
                            if (in1) v1 = a.alpha * acc[i][j][2 * h + 1] + a.beta * o.y;
                        }
                        bsk_dstore2(a.V, a.vdt, off, v0, v1);
                    } else {
                        if (in0) {
                            v0 = a.alpha * acc[i][j][2 * h];
                            if (a.beta != 0.0f) v0 += a.beta * bsk_dload(a.V, a.vdt, off);
                        }
                        if (in1) {
                            v1 = a.alpha * acc[i][j][2 * h + 1];
                            if (a.beta != 0.0f) v1 += a.beta * bsk_dload(a.V, a.vdt, off + 1);
                        }
                        bsk_dstore(a.V, a.vdt, off, v0);
                        bsk_dstore(a.V, a.vdt, off + 1, v1);
                    }
                }
            }
    }
}

template <typename T, int BM, int BN>
static bsk_status launch_cfg(bsk_context *ctx, sddmm_args &a)
{
    constexpr int WM = BM < 32 ? BM : 32, WN = BN < 32 ? BN : 32;
    a.tn = a.bc / BN;
    a.tiles = (int64_t)(a.br / BM) * a.tn;
    a.items = a.nnzb * a.tiles;
    sddmm_mma_kernel<T, BM, BN, WM, WN>
        <<<bsk_grid_for(a.items), sd_cfg<BM, BN, WM, WN>::THREADS, 0, (cudaStream_t)ctx->stream>>>(a);
    return BSK_CUDA_LAUNCH_CHECK();
}

template <typename T, int BM>
static bsk_status launch_bn(bsk_context *ctx, sddmm_args &a)
{
    if (a.bc % 64 == 0) return launch_cfg<T, BM, 64>(ctx, a);
    if (a.bc % 32 == 0) return launch_cfg<T, BM, 32>(ctx, a);
    return launch_cfg<T, BM, 16>(ctx, a);
}

template <typename T>
static bsk_status launch_bm(bsk_context *ctx, sddmm_args &a)
{
    if (a.br % 64 == 0) return launch_bn<T, 64>(ctx, a);
    if (a.br % 32 == 0) return launch_bn<T, 32>(ctx, a);
    return launch_bn<T, 16>(ctx, a);
}

bsk_status bsk_portable_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                              bsk_bsr *out)
{
    struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major < 8) return BSK_ERR_UNSUPPORTED;
    if (X->dtype != BSK_F16 && X->dtype != BSK_BF16) return BSK_ERR_UNSUPPORTED;
    if (out->block_rows % 16 || out->block_cols % 16) return BSK_ERR_UNSUPPORTED;
    if (X->ld % 8 || Y->ld % 8 || !bsk_aligned16(X->data) || !bsk_aligned16(Y->data)) return BSK_ERR_UNSUPPORTED;
    sddmm_args a;
    memset(&a, 0, sizeof a);
    bsk_sddmm_args_fill(a, X, Y, out);
    a.alpha = alpha;
    a.beta = beta;
    a.vdt = out->dtype;
    a.vpair = ((uintptr_t)out->values % (2 * bsk_dtype_size(out->dtype))) == 0; /* bc even: pairs stay aligned */
    if (a.nnzb == 0) return BSK_SUCCESS;
    bsk_status s = X->dtype == BSK_F16 ? launch_bm<__half>(ctx, a) : launch_bm<__nv_bfloat16>(ctx, a);
    if (!s) ctx->last_kernel = "cuda-sddmm-mma";
    return s;
}
