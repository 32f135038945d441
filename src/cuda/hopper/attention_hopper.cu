/* attention_hopper.cu — launcher of the Hopper (sm_90a) block-sparse attention forward kernel
   (attention_kernel.cuh): decides whether the TMA + wgmma kernel takes the case, builds the four tensor maps
   and launches a persistent grid (one CTA per SM, items from an atomic counter; the one-CTA-per-item schedule
   was slower at every density, docs/attention-notes.md). Declines (BSK_ERR_UNSUPPORTED: the mma.sync kernel
   of src/cuda/attention/attention_fwd.cu then runs) everything it does not do exactly right. */
#include <stdint.h>
#include "../cuda_internal.h"
#include "../../attention/attention_internal.h"
#include "attention_kernel.cuh"
#include "launch.cuh"
#include "tma.cuh"

using namespace bsk_hopper;

/* Kernel options (attention_kernel.cuh), measured on an H100 (docs/attention-notes.md, runs 4-6 and session 4).
   bsk__attn_variant 0 and 4 run the default (6 too, on 3 CTAs: many items per CTA, for the tests); 5, 7 and 8 are
   builds kept for same-run A/B timings, which the GPU's power state makes necessary (bench/attention_ab.py times
   them round-robin; bsk attention --compare times 5 and 7 beside the default).
   D=128: default XB | LR | SPLIT | OV | DT | NP (session 4: XB | LR | SPLIT | OV | DT +7 % dense over XB | LR |
   SPLIT, ahead of cuDNN in the same round-robin; session 11, H200, three round-robin runs of 30-40 rounds in both
   orders: NP (no ping-pong turns between the consumer warpgroups) +0.3-0.5 % at d 0.1, +2-6 % at d 0.25, +2 % at
   d 0.5 and dense); 5 = the session-3 default XB | LR | SPLIT, 7 = default + TR, 8 = default without NP (the
   session-4 default).
   D=64: default XB | EW | NP | DT (session 7: XB | EW | NP +3 to +4 % non-causal, +6 % causal over XB, the
   session-6 default: the early waits take the loop top's latency off each warpgroup's chain, and without the
   ping-pong turns that gains; session 12, H200: DT on top +4.1 to +5.3 % in two round-robin runs of 30 rounds in
   both orders, +3.8 to +4.1 % non-causal and +2.4 to +3.4 % causal in the C bench alternated — fewer issue slots
   per tile now that nothing else binds; DT alone on XB was -2 % in session 4); 5 = XB | EW | NP (the session-7
   default), 7 = default | LR (-5 %), 8 = default | SPLIT (level). Measured slower at D=64 and removed: OV (-6 % on
   EW | NP too, session 12), PB (session 4), PS (session 6, commit 0249890), EP (exponentials on the FMA pipe,
   session 6 helper 2, commit 7e6c7ae), OW (turn opened only after the GEMMs completed), SS (P·V from shared
   memory) (session 7, docs/attention-notes.md).
   Session 14 (both head dims): UC (the consumer index as a uniform register: no R2UR before any wgmma), H200, `bsk
   attention` alternated 4 8 8 4 x 3 (bench/results/attn_uc_ab_h200_2026-11-25_s14.txt): D=64 +1.6 % dense (502.3 vs
   494.7 TFLOPS), +1.8 % d 0.25, causal +1.0-1.2 %; D=128 +0.3-0.8 %. Variant 8 is now the default without UC (the
   session-12 default) for A/Bs; the previous 8s (D=128 without NP, D=64 with SPLIT) are in the notes above. */
static const int ATTN_DEFAULT_128 = ATTN_XB | ATTN_LR | ATTN_SPLIT | ATTN_OV | ATTN_DT | ATTN_NP | ATTN_UC;
static const int ATTN_V5_128 = ATTN_XB | ATTN_LR | ATTN_SPLIT, ATTN_V7_128 = ATTN_DEFAULT_128 | ATTN_TR,
                 ATTN_V8_128 = ATTN_DEFAULT_128 & ~ATTN_UC;
static const int ATTN_DEFAULT_64 = ATTN_XB | ATTN_EW | ATTN_NP | ATTN_DT | ATTN_UC;
static const int ATTN_V5_64 = ATTN_XB | ATTN_EW | ATTN_NP, ATTN_V7_64 = ATTN_DEFAULT_64 | ATTN_LR,
                 ATTN_V8_64 = ATTN_DEFAULT_64 & ~ATTN_UC;

/* A strided attention tensor as the 4-D TMA view (dim, seq, head, batch), boxes of 64 x box_rows x 1 x 1
   (128 bytes wide: the 128-byte swizzle's limit), zero-filled outside. A dimension of extent 1 whose stride
   TMA could not take gets a dummy one (its coordinate is always 0). */
static bsk_status attn_tmap(CUtensorMap *map, const bsk_attn_tensor *t, uint32_t box_rows)
{
    const cuuint64_t dims[4] = {(cuuint64_t)t->dim, (cuuint64_t)t->seq, (cuuint64_t)t->heads, (cuuint64_t)t->batch};
    const int64_t st[3] = {t->stride_seq, t->stride_head, t->stride_batch};
    cuuint64_t strides[3];
    for (int i = 0; i < 3; i++)
        strides[i] = dims[i + 1] == 1 && (st[i] <= 0 || st[i] % 8 != 0) ? (cuuint64_t)t->dim * 2u : (cuuint64_t)st[i] * 2u;
    const cuuint32_t box[4] = {64, box_rows, 1, 1};
    return bsk_hopper_tmap_encode(map, t->data, t->dtype, 4, dims, strides, box);
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

template <int DT, int D, int STAGES, int OPT>
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
    int64_t ctas = items;
    cudaStream_t stream = (cudaStream_t)ctx->stream;
    /* the queue lives in its own buffer (zero between launches, reset by the kernel's last CTA), not in the
       workspace: a memset before the launch would stand between this kernel and the one before it (the gate),
       and an earlier kernel may write the workspace */
    if ((s = bsk_cuda_queue(ctx, BSK_QUEUE_ATTN, &p.counter))) return s;
    const int cap = bsk__attn_variant == 6 ? 3 : st->sms;
    if (ctas > cap) ctas = cap;
    static int opted_in = 0; /* once per instantiation (one process, one device in practice) */
    if (!opted_in) {
        if (bsk_hopper_allow_smem(attn_hopper_kernel<DT, D, STAGES, OPT>, CF::SMEM)) return BSK_ERR_UNSUPPORTED;
        opted_in = 1;
    }
    /* programmatic dependent launch (bsk__attn_pdl, default 1): the CTAs' setup (barriers, tensor-map prefetch)
       overlaps the previous kernel's tail — e.g. the top-k gate, which lets its dependents launch at its start —
       and griddepcontrol.wait (attention_kernel.cuh) holds every global access until that kernel is done */
    s = bsk_hopper_launch(attn_hopper_kernel<DT, D, STAGES, OPT>, (int)ctas, CF::THREADS, CF::SMEM, stream, bsk__attn_pdl,
                          1, tq, tk, tv, to, p);
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
    const bool bf = dt == BSK_BF16;
    if (d->dim == 128) {
#define ATTN_LAUNCH(O) (bf ? launch<BSK_BF16, 128, 2, O>(ctx, st, p, d) : launch<BSK_F16, 128, 2, O>(ctx, st, p, d))
        if (v == 7) return ATTN_LAUNCH(ATTN_V7_128);
        if (v == 5) return ATTN_LAUNCH(ATTN_V5_128);
        if (v == 8) return ATTN_LAUNCH(ATTN_V8_128);
        return ATTN_LAUNCH(ATTN_DEFAULT_128);
#undef ATTN_LAUNCH
    }
#define ATTN_LAUNCH(O) (bf ? launch<BSK_BF16, 64, 4, O>(ctx, st, p, d) : launch<BSK_F16, 64, 4, O>(ctx, st, p, d))
    if (v == 7) return ATTN_LAUNCH(ATTN_V7_64);
    if (v == 5) return ATTN_LAUNCH(ATTN_V5_64);
    if (v == 8) return ATTN_LAUNCH(ATTN_V8_64);
    return ATTN_LAUNCH(ATTN_DEFAULT_64);
#undef ATTN_LAUNCH
}
