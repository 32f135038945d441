/* attention_hopper.cu — launcher of the Hopper (sm_90a) block-sparse attention forward kernel
   (attention_kernel.cuh): decides whether the TMA + wgmma kernel takes the case, builds the four tensor maps
   and launches either one CTA per (batch, head, query block) or a persistent grid (one CTA per SM, items from
   an atomic counter). Declines (BSK_ERR_UNSUPPORTED: the mma.sync kernel of src/cuda/attention/attention_fwd.cu
   then runs) everything it does not do exactly right.
   Schedules (bsk__attn_variant, see attention_fwd.cu): 5 persistent, 6 persistent on 3 CTAs (tests: many
   items per CTA), 7 one CTA per item; 0 and 4 take PERSIST_DEFAULT. */
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled_v12000 */
#include <stdint.h>
#include "../cuda_internal.h"
#include "../../attention/attention_internal.h"
#include "attention_kernel.cuh"

using namespace bsk_hopper;

/* Measured on an H100 (docs/attention-notes.md, run 2): the persistent schedule was faster at every density
   (d 0.1: +15% non-causal, +23% causal) and never measurably slower. */
static const int PERSIST_DEFAULT = 1;

/* The driver's encoder, looked up once (a benign race: concurrent first calls store the same pointer). */
static PFN_cuTensorMapEncodeTiled_v12000 attn_encode_fn(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = NULL;
    static int tried = 0;
    if (!tried) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
        else
            (void)cudaGetLastError();
        tried = 1;
    }
    return fn;
}

/* A strided attention tensor as the 4-D TMA view (dim, seq, head, batch), boxes of 64 x box_rows x 1 x 1
   (128 bytes wide: the 128-byte swizzle's limit), zero-filled outside. A dimension of extent 1 whose stride
   TMA could not take gets a dummy one (its coordinate is always 0). */
static bsk_status attn_tmap(CUtensorMap *map, const bsk_attn_tensor *t, uint32_t box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 fn = attn_encode_fn();
    if (!fn) return BSK_ERR_UNSUPPORTED;
    const cuuint64_t dims[4] = {(cuuint64_t)t->dim, (cuuint64_t)t->seq, (cuuint64_t)t->heads, (cuuint64_t)t->batch};
    const int64_t st[3] = {t->stride_seq, t->stride_head, t->stride_batch};
    cuuint64_t strides[3];
    for (int i = 0; i < 3; i++)
        strides[i] = dims[i + 1] == 1 && (st[i] <= 0 || st[i] % 8 != 0) ? (cuuint64_t)t->dim * 2u : (cuuint64_t)st[i] * 2u;
    const cuuint32_t box[4] = {64, box_rows, 1, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = fn(map, t->dtype == BSK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
                    t->data, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? BSK_SUCCESS : BSK_ERR_UNSUPPORTED;
}

/* What TMA can address: 16-byte aligned base, strides of the dimensions that vary positive multiples of
   16 bytes below 2^40 bytes. (Broadcast strides of 0 are left to the portable kernel.) */
static int tma_ok(const bsk_attn_tensor *t)
{
    if (((uintptr_t)t->data & 15u) != 0) return 0;
    const int64_t n[3] = {t->seq, t->heads, t->batch}, st[3] = {t->stride_seq, t->stride_head, t->stride_batch};
    for (int i = 0; i < 3; i++) {
        if (n[i] > INT32_MAX - 256) return 0;
        if (n[i] > 1 && (st[i] <= 0 || st[i] % 8 != 0 || st[i] >= ((int64_t)1 << 39))) return 0;
    }
    return 1;
}

template <int DT, int D, int STAGES, bool PERSIST>
static bsk_status launch(bsk_context *ctx, const struct bsk_cuda_state *st, const bsk_attention_params *pp,
                         const bsk__attn_dims *d)
{
    typedef AttnCfg<D, STAGES> CF;
    if ((size_t)CF::SMEM > st->smem_optin) return BSK_ERR_UNSUPPORTED;
    const bsk_attn_layout *L = pp->layout;
    if (2 * (int64_t)L->capacity > CF::MAXT) return BSK_ERR_UNSUPPORTED;
    CUtensorMap tq, tk, tv, to;
    bsk_status s;
    if ((s = attn_tmap(&tq, &pp->q, 128)) || (s = attn_tmap(&tk, &pp->k, 128)) || (s = attn_tmap(&tv, &pp->v, 128)) ||
        (s = attn_tmap(&to, &pp->o, 64)))
        return s;
    AttnHParams p;
    p.lse = pp->lse;
    p.full_count = L->full_count;
    p.full_idx = L->full_idx;
    p.part_count = L->part_count;
    p.part_idx = L->part_idx;
    p.kv_lens = pp->kv_lens;
    p.off = pp->causal_offset;
    p.seq_q = (int)d->seq_q;
    p.seq_k = (int)d->seq_k;
    p.heads = (int)d->heads;
    p.group = (int)(d->heads / d->kv_heads);
    p.mq = (int)d->mq;
    p.nb = (int)d->nb;
    p.cap = L->capacity;
    p.lay_b = L->batch;
    p.lay_h = L->heads;
    p.causal = pp->causal;
    p.scale_log2 = d->scale * 1.4426950408889634f;
    const int64_t items = d->batch * d->heads * d->mq;
    p.total = (unsigned)items;
    p.counter = NULL;
    int64_t ctas = items;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    if (PERSIST) {
        void *ws = NULL;
        if ((s = bsk_cuda_workspace(ctx, 256, &ws))) return s;
        p.counter = (unsigned *)ws;
        cudaError_t e = cudaMemsetAsync(ws, 0, sizeof(unsigned), stream);
        if (e != cudaSuccess) return bsk_cuda_status(e);
        const int cap = bsk__attn_variant == 6 ? 3 : st->sms;
        if (ctas > cap) ctas = cap;
    }
    static int opted_in = 0; /* once per instantiation (one process, one device in practice) */
    if (!opted_in) {
        cudaError_t e = cudaFuncSetAttribute(attn_hopper_kernel<DT, D, STAGES, PERSIST>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM);
        if (e != cudaSuccess) { (void)cudaGetLastError(); return BSK_ERR_UNSUPPORTED; }
        opted_in = 1;
    }
    attn_hopper_kernel<DT, D, STAGES, PERSIST><<<(unsigned)ctas, CF::THREADS, CF::SMEM, stream>>>(tq, tk, tv, to, p);
    s = BSK_CUDA_LAUNCH_CHECK();
    if (!s) ctx->last_kernel = "hopper-attn-wgmma";
    return s;
}

bsk_status bsk_hopper_attention_forward(bsk_context *ctx, const bsk_attention_params *p, const struct bsk__attn_dims *d)
{
    const struct bsk_cuda_state *st = bsk_cuda_state_get(ctx);
    if (!st) return BSK_ERR_OUT_OF_MEMORY;
    if (st->cc_major != 9 || st->cc_minor != 0) return BSK_ERR_UNSUPPORTED; /* sm_90a code only */
    const bsk_attn_layout *L = p->layout;
    const bsk_dtype dt = p->q.dtype;
    if (dt != BSK_F16 && dt != BSK_BF16) return BSK_ERR_UNSUPPORTED;
    if (d->dim != 64 && d->dim != 128) return BSK_ERR_UNSUPPORTED;
    if (L->block_q != 128 || L->block_k != 128) return BSK_ERR_UNSUPPORTED;
    /* the max is taken on unscaled scores and the scale folded into the exponent: positive scales only */
    if (!(d->scale > 0.0f)) return BSK_ERR_UNSUPPORTED;
    if (d->seq_q < 1 || d->seq_k < 1 || d->seq_q > INT32_MAX - 256 || d->seq_k > INT32_MAX - 256) return BSK_ERR_UNSUPPORTED;
    if (d->batch > INT32_MAX || d->heads > INT32_MAX || d->mq > INT32_MAX || d->nb > INT32_MAX) return BSK_ERR_UNSUPPORTED;
    if (d->batch * d->heads * d->mq > INT32_MAX) return BSK_ERR_UNSUPPORTED;
    if (!tma_ok(&p->q) || !tma_ok(&p->k) || !tma_ok(&p->v) || !tma_ok(&p->o)) return BSK_ERR_UNSUPPORTED;
    const int v = bsk__attn_variant;
    const bool persist = v == 5 || v == 6 || (v != 7 && PERSIST_DEFAULT);
    if (d->dim == 128) {
        if (persist)
            return dt == BSK_BF16 ? launch<BSK_BF16, 128, 2, true>(ctx, st, p, d) : launch<BSK_F16, 128, 2, true>(ctx, st, p, d);
        return dt == BSK_BF16 ? launch<BSK_BF16, 128, 2, false>(ctx, st, p, d) : launch<BSK_F16, 128, 2, false>(ctx, st, p, d);
    }
    if (persist)
        return dt == BSK_BF16 ? launch<BSK_BF16, 64, 4, true>(ctx, st, p, d) : launch<BSK_F16, 64, 4, true>(ctx, st, p, d);
    return dt == BSK_BF16 ? launch<BSK_BF16, 64, 4, false>(ctx, st, p, d) : launch<BSK_F16, 64, 4, false>(ctx, st, p, d);
}
