/* portable_common.cuh — what the portable (sm_80+) and SIMT kernels share: element conversions, the few
   PTX instructions they use (cp.async, ldmatrix, mma.sync) as tiny inline wrappers, and index helpers that
   stay in bounds for malformed BSR metadata. */
#ifndef BSK_PORTABLE_COMMON_CUH
#define BSK_PORTABLE_COMMON_CUH

#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "../cuda_internal.h"

/* ---- element conversions */
__device__ __forceinline__ float bsk_tof(float v) { return v; }
__device__ __forceinline__ float bsk_tof(__half v) { return __half2float(v); }
__device__ __forceinline__ float bsk_tof(__nv_bfloat16 v) { return __bfloat162float(v); }

/* Element i of an array of run-time dtype dt, as float. */
__device__ __forceinline__ float bsk_dload(const void *p, int dt, int64_t i)
{
    if (dt == BSK_F32) return ((const float *)p)[i];
    if (dt == BSK_F16) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

/* Store v (round to nearest even, like the CPU backend) as run-time dtype dt. */
__device__ __forceinline__ void bsk_dstore(void *p, int dt, int64_t i, float v)
{
    if (dt == BSK_F32) ((float *)p)[i] = v;
    else if (dt == BSK_F16) ((__half *)p)[i] = __float2half_rn(v);
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

/* Two adjacent elements i, i+1 (the caller checked alignment: i even, base aligned to 2 elements). */
__device__ __forceinline__ void bsk_dstore2(void *p, int dt, int64_t i, float v0, float v1)
{
    if (dt == BSK_F32) *(float2 *)((float *)p + i) = make_float2(v0, v1);
    else if (dt == BSK_F16) *(__half2 *)((__half *)p + i) = __floats2half2_rn(v0, v1);
    else *(__nv_bfloat162 *)((__nv_bfloat16 *)p + i) = __floats2bfloat162_rn(v0, v1);
}
__device__ __forceinline__ float2 bsk_dload2(const void *p, int dt, int64_t i)
{
    if (dt == BSK_F32) return *(const float2 *)((const float *)p + i);
    if (dt == BSK_F16) return __half22float2(*(const __half2 *)((const __half *)p + i));
    return __bfloat1622float2(*(const __nv_bfloat162 *)((const __nv_bfloat16 *)p + i));
}

/* ---- metadata helpers: every index read from the device is clamped before use */

/* [*lo, *hi) = ptr[i] .. ptr[i+1] clamped into [0, n], hi >= lo. */
__device__ __forceinline__ void bsk_range(const int32_t *ptr, int64_t i, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t a = ptr[i], b = ptr[i + 1];
    a = a < 0 ? 0 : (a > n ? n : a);
    b = b < a ? a : (b > n ? n : b);
    *lo = a;
    *hi = b;
}

/* The block row holding block p: the last i in [0, mb) with clamp(row_ptr[i]) <= p. Deterministic and in
   range for any row_ptr; the true row for a valid one (empty rows share a start and are skipped). */
__device__ __forceinline__ int64_t bsk_row_of(const int32_t *row_ptr, int64_t mb, int64_t nnzb, int64_t p)
{
    int64_t lo = 0, hi = mb - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) >> 1;
        int64_t v = row_ptr[mid];
        v = v < 0 ? 0 : (v > nnzb ? nnzb : v);
        if (v <= p) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* ---- PTX wrappers (sm_80+) */
__device__ __forceinline__ uint32_t bsk_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* A 16-byte global source for zero-filling copies: cp.async with src-size 0 reads nothing, but we still
   hand it an address that is valid, so no out-of-bounds pointer is ever formed. One per translation unit
   (no relocatable device code). */
static __device__ uint4 bsk_zero16;

/* Copy 16 bytes global → shared; only the first `bytes` (0..16) are read, the rest are zero-filled. */
__device__ __forceinline__ void bsk_cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bsk_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bsk_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bsk_ldsm_x4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void bsk_ldsm_x4_t(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* d += a·b, m16n8k16, fp32 accumulate. a: 4 regs (row-major A fragment), b: 2 regs (col-major B). */
__device__ __forceinline__ void bsk_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], __half)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void bsk_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2], __nv_bfloat16)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- host helpers */
static inline int bsk_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Grid size for a grid-stride loop over `items` work items. */
static inline unsigned bsk_grid_for(int64_t items)
{
    const int64_t cap = (int64_t)1 << 30;
    return (unsigned)(items < 1 ? 1 : (items > cap ? cap : items));
}

/* The problem fields every SpMM argument struct here shares (spmm_args, simt_spmm_args): C = op(A)·B seen as
   lists of blocks — op N: A's block rows; op T: A's block columns through the transpose index. One place fills
   them for every kernel family. */
template <class Args>
static inline void bsk_spmm_args_fill(Args &a, bsk_op op, const bsk_bsr *A, const bsk_dense *B, const bsk_dense *C)
{
    const bool trans = op == BSK_OP_T;
    a.vals = A->values;
    a.B = B->data;
    a.C = C->data;
    a.ldb = B->ld;
    a.ldc = C->ld;
    a.M = C->rows;
    a.K = B->rows;
    a.N = C->cols;
    a.nnzb = A->nnzb;
    a.bsz = (int64_t)A->block_rows * A->block_cols;
    a.bc = A->block_cols;
    a.MB = trans ? A->block_cols : A->block_rows;
    a.KB = trans ? A->block_rows : A->block_cols;
    a.nlist = trans ? bsk_bsr_nb(A) : bsk_bsr_mb(A);
    a.nidx = trans ? bsk_bsr_mb(A) : bsk_bsr_nb(A);
}

/* Likewise for the SDDMM argument structs (sddmm_args, simt_sddmm_args). */
template <class Args>
static inline void bsk_sddmm_args_fill(Args &a, const bsk_dense *X, const bsk_dense *Y, bsk_bsr *out)
{
    a.row_ptr = out->row_ptr;
    a.col_idx = out->col_idx;
    a.X = X->data;
    a.Y = Y->data;
    a.V = out->values;
    a.ldx = X->ld;
    a.ldy = Y->ld;
    a.M = out->rows;
    a.K = out->cols;
    a.D = X->cols;
    a.mb = bsk_bsr_mb(out);
    a.nb = bsk_bsr_nb(out);
    a.nnzb = out->nnzb;
    a.br = out->block_rows;
    a.bc = out->block_cols;
    a.bsz = (int64_t)a.br * a.bc;
}

#endif
