/* attention_bwd.c — the public attention backward: the forward's checks (shared, attention.c) on the
   inputs q, k, v, o, lse and the layout, then the backward's own operands (d_o, and the outputs dq, dk,
   dv, which must not overlap anything), then the backend the memory is on. Nothing is written before
   every check has passed. */
#include <stdint.h>
#include "attention_internal.h"

static int same_shape(const bsk_attn_tensor *a, const bsk_attn_tensor *b)
{
    return a->batch == b->batch && a->seq == b->seq && a->heads == b->heads && a->dim == b->dim;
}

static bsk_status bsk_attention_backward_body(bsk_context *ctx, const bsk_attention_bwd_params *p)
{
    if (!ctx || !p || !p->layout) return BSK_ERR_NULL_POINTER;
    if (!p->lse) return BSK_ERR_NULL_POINTER;
    /* q, k, v, o, lse, layout, kv_lens, scale, causal: exactly the forward's rules, with o and lse inputs */
    bsk_attention_params f = {p->q, p->k, p->v, p->o, (float *)p->lse, p->layout, p->kv_lens,
                              p->scale, p->causal, p->causal_offset};
    bsk__attn_dims d;
    bsk_status s = bsk__attention_check(ctx, &f, 0, &d);
    if (s) return s;
    const bsk_attn_tensor *outs[3] = {&p->dq, &p->dk, &p->dv};
    if ((s = bsk__attn_check_tensor(&p->d_o))) return s;
    for (int i = 0; i < 3; i++)
        if ((s = bsk__attn_check_tensor(outs[i]))) return s;
    bsk_dtype t = p->q.dtype;
    if (p->d_o.dtype != t || p->dq.dtype != t || p->dk.dtype != t || p->dv.dtype != t) return BSK_ERR_UNSUPPORTED;
    if (!same_shape(&p->d_o, &p->o) || !same_shape(&p->dq, &p->q) || !same_shape(&p->dk, &p->k) ||
        !same_shape(&p->dv, &p->v))
        return BSK_ERR_SHAPE_MISMATCH;
    bsk_memory m = p->q.mem;
    if (p->d_o.mem != m || p->dq.mem != m || p->dk.mem != m || p->dv.mem != m) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_location(p->d_o.data, m))) return s;
    for (int i = 0; i < 3; i++)
        if ((s = bsk__check_location(outs[i]->data, m))) return s;
    if ((s = bsk__check_location(p->d_lse, m))) return s;
    if (((uintptr_t)p->d_lse & 3u) != 0) return BSK_ERR_MISALIGNED;
    /* outputs: no element written twice, no output over another output or over any input */
    int64_t lse_bytes = bsk__attn_lse_bytes(d.batch, d.heads, d.seq_q);
    const bsk_attn_tensor *ins[5] = {&p->q, &p->k, &p->v, &p->o, &p->d_o};
    for (int i = 0; i < 3; i++) {
        const bsk_attn_tensor *a = outs[i];
        int64_t ab = bsk__attn_tensor_bytes(a);
        if (bsk__attn_self_overlaps(a) || bsk__overlaps(a->data, ab, p->lse, lse_bytes) ||
            bsk__overlaps(a->data, ab, p->d_lse, lse_bytes) ||
            bsk__attn_overlaps_reads(a->data, ab, p->layout, p->kv_lens, d.batch))
            return BSK_ERR_INVALID_ARGUMENT;
        for (int j = 0; j < 5; j++)
            if (bsk__overlaps(a->data, ab, ins[j]->data, bsk__attn_tensor_bytes(ins[j]))) return BSK_ERR_INVALID_ARGUMENT;
        for (int j = i + 1; j < 3; j++)
            if (bsk__overlaps(a->data, ab, outs[j]->data, bsk__attn_tensor_bytes(outs[j]))) return BSK_ERR_INVALID_ARGUMENT;
    }
    if (d.batch * d.heads * d.seq_q == 0 && d.batch * d.kv_heads * d.seq_k == 0) return BSK_SUCCESS;
    if (m == BSK_MEM_HOST) {
        ctx->last_kernel = "cpu-attention-bwd";
        return bsk_cpu_attention_backward(p, &d);
    }
#ifdef BSK_WITH_CUDA
    return bsk_cuda_attention_backward(ctx, p, &d);
#else
    return BSK_ERR_NO_DEVICE;
#endif
}

bsk_status bsk_attention_backward(bsk_context *ctx, const bsk_attention_bwd_params *p)
{
    bsk__trace_begin(ctx, "bsk_attention_backward");
    return bsk__trace_end(ctx, bsk_attention_backward_body(ctx, p));
}
