/* simt.cu — CUDA-core kernels for every case the tensor-core paths do not take: F32 inputs, block sizes
   that are not multiples of 16, unaligned or odd leading dimensions. Simple shared-memory tiling, fp32
   accumulation in a fixed order (deterministic), every global access bounds-checked. Also the test hooks
   that run one kernel family directly. */
#include <string.h>
#include "portable_common.cuh"

#define TM 16 /* output rows per CTA tile    */
#define TN 64 /* output columns per CTA tile */
#define TK 16 /* inner chunk                 */

struct simt_spmm_args {
    const int32_t *ptr, *idx, *blk; /* as in spmm_mma.cu */
    const void *vals, *B;
    void *C;
    int64_t ldb, ldc, M, K, N, nlist, nidx, nnzb, bsz;
    int32_t bc, MB, KB;
    int64_t msub, ntiles, items;
    float alpha, beta;
    int cdt;
};

template <typename T, bool TRANS>
__global__ void __launch_bounds__(256) spmm_simt_kernel(const simt_spmm_args a)
{
    __shared__ float sA[TM][TK + 1]; /* [m][k] */
    __shared__ float sB[TK][TN];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const T *vals = (const T *)a.vals, *B = (const T *)a.B;
    const int64_t rowtiles = a.nlist * a.msub;
    for (int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
        const int64_t rt = item % rowtiles, nt = item / rowtiles, list = rt / a.msub;
        const int m0 = (int)(rt % a.msub) * TM;
        const int64_t n0 = nt * TN;
        int64_t p0 = 0, p1 = 0;
        if (a.ptr) bsk_range(a.ptr, list, a.nnzb, &p0, &p1);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int64_t p = p0; p < p1; p++) {
            const int64_t jx = a.idx[p], b = a.blk ? (int64_t)a.blk[p] : p;
            if (jx < 0 || jx >= a.nidx || b < 0 || b >= a.nnzb) continue; /* malformed: skip (uniform) */
            const T *ablk = vals + b * a.bsz;
            for (int kc = 0; kc < a.KB; kc += TK) {
                if (!TRANS) {
                    int mm = m0 + ty, kk = kc + tx;
                    sA[ty][tx] = (mm < a.MB && kk < a.KB) ? bsk_tof(ablk[(int64_t)mm * a.bc + kk]) : 0.0f;
                } else { /* element (m, k) of Aᵀ is block[k][m]: read along m (coalesced), store transposed */
                    int kk = kc + ty, mm = m0 + tx;
                    sA[tx][ty] = (mm < a.MB && kk < a.KB) ? bsk_tof(ablk[(int64_t)kk * a.bc + mm]) : 0.0f;
                }
#pragma unroll
                for (int q = 0; q < 4; q++) {
                    int r = (tid >> 6) + 4 * q, c = tid & 63;
                    int64_t grow = jx * a.KB + kc + r, gcol = n0 + c;
                    sB[r][c] = (kc + r < a.KB && grow < a.K && gcol < a.N) ? bsk_tof(B[grow * a.ldb + gcol]) : 0.0f;
                }
                __syncthreads();
#pragma unroll
                for (int k = 0; k < TK; k++) {
                    float av = sA[ty][k];
#pragma unroll
                    for (int q = 0; q < 4; q++) acc[q] += av * sB[k][tx + 16 * q];
                }
                __syncthreads();
            }
        }
        const int64_t grow = list * a.MB + m0 + ty;
        if (m0 + ty < a.MB && grow < a.M) {
#pragma unroll
            for (int q = 0; q < 4; q++) {
                int64_t gcol = n0 + tx + 16 * q;
                if (gcol >= a.N) continue;
                int64_t off = grow * a.ldc + gcol;
                float v = a.alpha * acc[q];
                if (a.beta != 0.0f) v += a.beta * bsk_dload(a.C, a.cdt, off);
                bsk_dstore(a.C, a.cdt, off, v);
            }
        }
    }
}

bsk_status bsk_simt_spmm(bsk_context *ctx, bsk_op op, float alpha, const bsk_bsr *A, const bsk_dense *B, float beta,
                         bsk_dense *C)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    simt_spmm_args a;
    memset(&a, 0, sizeof a);
    const bool trans = op == BSK_OP_T;
    bsk_spmm_args_fill(a, op, A, B, C);
    a.msub = (a.MB + TM - 1) / TM;
    a.ntiles = (a.N + TN - 1) / TN;
    a.items = a.nlist * a.msub * a.ntiles;
    a.alpha = alpha;
    a.beta = beta;
    a.cdt = C->dtype;
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
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    unsigned grid = bsk_grid_for(a.items);
#define SIMT_LAUNCH(T)                                                                                   \
    (trans ? spmm_simt_kernel<T, true><<<grid, 256, 0, stream>>>(a) : spmm_simt_kernel<T, false><<<grid, 256, 0, stream>>>(a))
    if (A->dtype == BSK_F32) SIMT_LAUNCH(float);
    else if (A->dtype == BSK_F16) SIMT_LAUNCH(__half);
    else SIMT_LAUNCH(__nv_bfloat16);
#undef SIMT_LAUNCH
    bsk_status s = BSK_CUDA_LAUNCH_CHECK();
    if (trans) bsk_cuda_tindex_done(ctx, &ti);
    if (!s) ctx->last_kernel = "cuda-simt";
    return s;
}

/* ---- SDDMM: a CTA computes a 16 x 16 piece of one output block, D in chunks of 16 */

struct simt_sddmm_args {
    const int32_t *row_ptr, *col_idx;
    const void *X, *Y;
    void *V;
    int64_t ldx, ldy, M, K, D, mb, nb, nnzb, bsz;
    int32_t br, bc;
    int64_t tn, tiles, items;
    float alpha, beta;
    int vdt;
};

template <typename T>
__global__ void __launch_bounds__(256) sddmm_simt_kernel(const simt_sddmm_args a)
{
    __shared__ float sX[16][17], sY[16][17];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const T *X = (const T *)a.X, *Y = (const T *)a.Y;
    for (int64_t item = blockIdx.x; item < a.items; item += gridDim.x) {
        const int64_t p = item / a.tiles, tile = item % a.tiles;
        const int m0 = (int)(tile / a.tn) * 16, c0 = (int)(tile % a.tn) * 16;
        const int64_t jx = a.col_idx[p];
        if (jx < 0 || jx >= a.nb) continue; /* malformed: leave the block alone (uniform) */
        const int64_t i = bsk_row_of(a.row_ptr, a.mb, a.nnzb, p);
        const int64_t xr = i * a.br + m0 + ty, yr = jx * a.bc + c0 + ty;
        const bool xok = m0 + ty < a.br && xr < a.M, yok = c0 + ty < a.bc && yr < a.K;
        float acc = 0.0f;
        for (int64_t d0 = 0; d0 < a.D; d0 += 16) {
            int64_t d = d0 + tx;
            sX[ty][tx] = (xok && d < a.D) ? bsk_tof(X[xr * a.ldx + d]) : 0.0f;
            sY[ty][tx] = (yok && d < a.D) ? bsk_tof(Y[yr * a.ldy + d]) : 0.0f;
            __syncthreads();
#pragma unroll
            for (int k = 0; k < 16; k++) acc += sX[ty][k] * sY[tx][k];
            __syncthreads();
        }
        const int r = m0 + ty, c = c0 + tx;
        if (r < a.br && c < a.bc) {
            const int64_t off = p * a.bsz + (int64_t)r * a.bc + c;
            const bool in = i * a.br + r < a.M && jx * a.bc + c < a.K;
            float v = 0.0f; /* padding of partial blocks is written as 0 */
            if (in) {
                v = a.alpha * acc;
                if (a.beta != 0.0f) v += a.beta * bsk_dload(a.V, a.vdt, off);
            }
            bsk_dstore(a.V, a.vdt, off, v);
        }
    }
}

bsk_status bsk_simt_sddmm(bsk_context *ctx, float alpha, const bsk_dense *X, const bsk_dense *Y, float beta,
                          bsk_bsr *out)
{
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    simt_sddmm_args a;
    memset(&a, 0, sizeof a);
    bsk_sddmm_args_fill(a, X, Y, out);
    a.tn = (a.bc + 15) / 16;
    a.tiles = ((a.br + 15) / 16) * a.tn;
    a.items = a.nnzb * a.tiles;
    a.alpha = alpha;
    a.beta = beta;
    a.vdt = out->dtype;
    if (a.items == 0) return BSK_SUCCESS;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    unsigned grid = bsk_grid_for(a.items);
    if (X->dtype == BSK_F32) sddmm_simt_kernel<float><<<grid, 256, 0, stream>>>(a);
    else if (X->dtype == BSK_F16) sddmm_simt_kernel<__half><<<grid, 256, 0, stream>>>(a);
    else sddmm_simt_kernel<__nv_bfloat16><<<grid, 256, 0, stream>>>(a);
    bsk_status s = BSK_CUDA_LAUNCH_CHECK();
    if (!s) ctx->last_kernel = "cuda-simt-sddmm";
    return s;
}

/* ---- test hooks */

extern "C" bsk_status bsk__cuda_spmm_family(bsk_context *ctx, int family, bsk_op op, float alpha, const bsk_bsr *A,
                                            const bsk_dense *B, float beta, bsk_dense *C)
{
    if (!ctx || !ctx->has_device) return BSK_ERR_NO_DEVICE;
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    if (family == 0) return bsk_hopper_spmm(ctx, op, alpha, A, B, beta, C);
    if (family == 1) return bsk_portable_spmm(ctx, op, alpha, A, B, beta, C);
    if (family == 2) return bsk_simt_spmm(ctx, op, alpha, A, B, beta, C);
    return BSK_ERR_INVALID_ARGUMENT;
}

extern "C" bsk_status bsk__cuda_sddmm_family(bsk_context *ctx, int family, float alpha, const bsk_dense *X,
                                             const bsk_dense *Y, float beta, bsk_bsr *out)
{
    if (!ctx || !ctx->has_device) return BSK_ERR_NO_DEVICE;
    if (!bsk_cuda_state_get(ctx)) return BSK_ERR_OUT_OF_MEMORY;
    if (family == 0) return bsk_hopper_sddmm(ctx, alpha, X, Y, beta, out);
    if (family == 1) return bsk_portable_sddmm(ctx, alpha, X, Y, beta, out);
    if (family == 2) return bsk_simt_sddmm(ctx, alpha, X, Y, beta, out);
    return BSK_ERR_INVALID_ARGUMENT;
}
