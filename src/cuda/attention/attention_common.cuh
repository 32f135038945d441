/* attention_common.cuh — what the mma.sync attention kernels of attention_fwd.cu and attention_bwd.cu share:
   the m16n8k16 fragment pieces (packing, the MMA with B as two registers, the shared-memory swizzle), the
   base-2 exponential, and the walk over a query block's layout lists in 64-key chunks. The walk is templated
   on the argument struct (AttnArgs, BwdArgs): both name the fields it reads alike. PTX wrappers themselves
   live in ../portable/portable_common.cuh.
   Everything sits in an anonymous namespace, as it did in each file: internal to the one translation unit
   that includes it, like the kernels that use it. */
#ifndef BSK_ATTENTION_COMMON_CUH
#define BSK_ATTENTION_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "../cuda_internal.h"
#include "../portable/portable_common.cuh"
#include "../../attention/attention_internal.h"

namespace {

constexpr float LOG2E = 1.4426950408889634f;

/* ---- element and fragment pieces */
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b)
{
    __half2 h = __floats2half2_rn(a, b); /* a in the low half: the lower column */
    return *reinterpret_cast<uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ void st_el(float *p, float v) { *p = v; }
__device__ __forceinline__ void st_el(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void st_el(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }

/* d += a·b with b given as two registers */
template <typename T> __device__ __forceinline__ void mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    const uint32_t b[2] = {b0, b1};
    bsk_mma16816(d, a, b, T());
}

__device__ __forceinline__ float fast_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); /* ex2(-inf) = +0, as the masking relies on */
    return y;
}

/* Element offset of 16-byte chunk c of row r in a swizzled tile of D-element rows: chunk c ^ (r % 8), so
   the 8 rows one ldmatrix reads sit in 8 different bank groups. */
template <int D> __device__ __forceinline__ int swz(int r, int c) { return r * D + ((c ^ (r & 7)) << 3); }

/* The A fragment of a 16x16 product from fp32 accumulators: c[0], c[1] are the n-tiles of columns
   16kk..16kk+7 and 16kk+8..16kk+15 (c = acc + 2kk), so P or dS never leaves registers. */
template <typename T> __device__ __forceinline__ void acc_to_a(uint32_t *a, const float (*c)[4])
{
    a[0] = pack2<T>(c[0][0], c[0][1]);
    a[1] = pack2<T>(c[0][2], c[0][3]);
    a[2] = pack2<T>(c[1][0], c[1][1]);
    a[3] = pack2<T>(c[1][2], c[1][3]);
}

/* ---- the layout walk (A: AttnArgs or BwdArgs) */
template <class A> __device__ __forceinline__ int64_t kv_len_of(const A &a, int64_t b)
{
    if (!a.kv_lens) return a.seq_k;
    int64_t t = a.kv_lens[b];
    return t < 0 ? 0 : (t > a.seq_k ? a.seq_k : t);
}

/* Which of the layout's lay_b*lay_h layouts serves (b, h): shared layouts broadcast. */
template <class A> __device__ __forceinline__ int64_t layout_of(const A &a, int64_t b, int64_t h)
{
    return (a.lay_b == 1 ? 0 : b) * a.lay_h + (a.lay_h == 1 ? 0 : h);
}

struct Lists {
    const int32_t *f, *p;
    int nf, np;
};

/* The full and partial lists of layout row `row` (layout · mq + query block), counts clamped to the capacity. */
template <class A> __device__ __forceinline__ Lists lists_row(const A &a, int64_t row)
{
    Lists L;
    L.nf = min(max(a.full_count[row], 0), a.cap);
    L.np = min(max(a.part_count[row], 0), a.cap);
    L.f = a.full_idx + row * a.cap;
    L.p = a.part_idx + row * a.cap;
    return L;
}

/* Key start of chunk c (tile c / cpt, 64-key piece c % cpt), or -1 when nothing in it can be visible to
   query rows up to q_last. */
template <class A>
__device__ __forceinline__ int64_t chunk_start(const A &a, const Lists &L, int c, int cpt, int64_t q_last, int64_t kv_len)
{
    const int t = c / cpt, sub = c - t * cpt;
    const int j = t < L.nf ? L.f[t] : L.p[t - L.nf];
    if (j < 0 || j >= a.nb) return -1;
    const int64_t k0 = (int64_t)j * a.block_k + sub * 64;
    if (k0 >= kv_len || (a.causal && k0 > q_last + a.off)) return -1;
    return k0;
}

/* The next chunk after c with something visible (its key start in k0), or n. */
template <class A>
__device__ __forceinline__ int next_chunk(const A &a, const Lists &L, int c, int n, int cpt, int64_t q_last,
                                          int64_t kv_len, int64_t &k0)
{
    for (c++; c < n; c++) {
        k0 = chunk_start(a, L, c, cpt, q_last, kv_len);
        if (k0 >= 0) return c;
    }
    return n;
}

/* ---- host side */

/* Whether a tensor's rows suit the 16-byte copies of the mma.sync kernels: base and strides in 8 elements. */
inline int row_ok(const bsk_attn_tensor *t)
{
    return ((uintptr_t)t->data & 15u) == 0 && t->stride_batch % 8 == 0 && t->stride_seq % 8 == 0 && t->stride_head % 8 == 0;
}

/* The fields AttnArgs and BwdArgs share, from the forward's or the backward's params (P) and the dims the
   front-end resolved. The caller has checked that batch, heads, mq and nb fit in an int. */
template <class A, class P> inline void attn_args_fill(A &a, const P *p, const bsk__attn_dims *d)
{
    const bsk_attn_layout *L = p->layout;
    a.q = p->q.data; a.k = p->k.data; a.v = p->v.data; a.o = p->o.data;
    a.q_sb = p->q.stride_batch; a.q_ss = p->q.stride_seq; a.q_sh = p->q.stride_head;
    a.k_sb = p->k.stride_batch; a.k_ss = p->k.stride_seq; a.k_sh = p->k.stride_head;
    a.v_sb = p->v.stride_batch; a.v_ss = p->v.stride_seq; a.v_sh = p->v.stride_head;
    a.o_sb = p->o.stride_batch; a.o_ss = p->o.stride_seq; a.o_sh = p->o.stride_head;
    a.seq_q = d->seq_q; a.seq_k = d->seq_k; a.off = p->causal_offset;
    a.batch = (int)d->batch; a.heads = (int)d->heads;
    a.group = d->kv_heads > 0 ? (int)(d->heads / d->kv_heads) : 0;
    a.dim = (int)d->dim; a.mq = (int)d->mq; a.nb = (int)d->nb;
    a.block_q = L->block_q; a.block_k = L->block_k; a.cap = L->capacity; a.lay_b = L->batch; a.lay_h = L->heads;
    a.causal = p->causal;
    a.full_count = L->full_count; a.full_idx = L->full_idx; a.part_count = L->part_count; a.part_idx = L->part_idx;
    a.kv_lens = p->kv_lens;
    a.scale_log2 = d->scale * LOG2E;
}

/* Lets a kernel use `smem` bytes of dynamic shared memory. */
template <typename K> inline bsk_status opt_in(K kernel, int smem)
{
    return bsk_cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}

} // namespace

#endif
