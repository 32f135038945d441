/* attention.c — the public attention operations: tensor views, validation of every argument, then the
   backend the memory is on. Nothing is written before every check has passed. */
#include <math.h>
#include <stdlib.h>
#include "attention_internal.h"

int bsk__attn_simt_forced = 0;
void bsk__attention_force_simt(int on) { bsk__attn_simt_forced = on; }
int bsk__attn_variant = 0;
int bsk__attn_pdl = 1;

#define MAX_DIM 512
#define MAX_OFFSET ((int64_t)1 << 31)

bsk_attn_tensor bsk_attn_tensor_bshd(void *data, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                                     bsk_dtype dtype, bsk_memory mem)
{
    bsk_attn_tensor t = {batch, seq, heads, dim, seq * heads * dim, heads * dim, dim, dtype, mem, data};
    return t;
}

bsk_attn_tensor bsk_attn_tensor_bhsd(void *data, int64_t batch, int64_t seq, int64_t heads, int64_t dim,
                                     bsk_dtype dtype, bsk_memory mem)
{
    bsk_attn_tensor t = {batch, seq, heads, dim, heads * seq * dim, dim, seq * dim, dtype, mem, data};
    return t;
}

static int dtype_ok(bsk_dtype t) { return t == BSK_F32 || t == BSK_F16 || t == BSK_BF16; }
static int mem_ok(bsk_memory m) { return m == BSK_MEM_HOST || m == BSK_MEM_DEVICE; }
static int64_t tensor_elems(const bsk_attn_tensor *t) { return t->batch * t->seq * t->heads; } /* rows */

/* Largest element offset + 1 (0 for an empty tensor); overflow was checked by check_tensor. */
static int64_t tensor_span(const bsk_attn_tensor *t)
{
    if (tensor_elems(t) == 0) return 0;
    return (t->batch - 1) * t->stride_batch + (t->seq - 1) * t->stride_seq + (t->heads - 1) * t->stride_head + t->dim;
}

static bsk_status check_tensor(const bsk_attn_tensor *t)
{
    if (!dtype_ok(t->dtype) || !mem_ok(t->mem)) return BSK_ERR_INVALID_ARGUMENT;
    if (t->batch < 0 || t->seq < 0 || t->heads < 0 || t->dim < 1) return BSK_ERR_INVALID_ARGUMENT;
    if (t->stride_batch < 0 || t->stride_seq < 0 || t->stride_head < 0) return BSK_ERR_INVALID_ARGUMENT;
    if (t->batch > BSK_LIMIT_DIM || t->seq > BSK_LIMIT_DIM || t->heads > BSK_LIMIT_DIM) return BSK_ERR_OVERFLOW;
    if (t->dim > MAX_DIM) return BSK_ERR_UNSUPPORTED;
    int64_t a, b, c, rows;
    if (!bsk__mul_ok(t->batch, t->seq, &rows) || !bsk__mul_ok(rows, t->heads, &rows)) return BSK_ERR_OVERFLOW;
    if (rows == 0) return BSK_SUCCESS;
    /* each product is < 2^62; compare before adding so that the sum cannot pass INT64_MAX */
    const int64_t lim = BSK_LIMIT_ELEMS / 4;
    if (!bsk__mul_ok(t->batch - 1, t->stride_batch, &a) || !bsk__mul_ok(t->seq - 1, t->stride_seq, &b) ||
        !bsk__mul_ok(t->heads - 1, t->stride_head, &c) || a >= lim || b >= lim - a || c >= lim - a - b ||
        t->dim >= lim - a - b - c)
        return BSK_ERR_OVERFLOW;
    if (!t->data) return BSK_ERR_NULL_POINTER;
    if (((uintptr_t)t->data & (bsk_dtype_size(t->dtype) - 1)) != 0) return BSK_ERR_MISALIGNED;
    return BSK_SUCCESS;
}

/* O must not write one element twice: sorted by stride, each dimension must step past the span of the
   smaller ones. Dimensions of extent 1 do not matter. */
static int self_overlaps(const bsk_attn_tensor *t)
{
    int64_t st[3] = {t->stride_batch, t->stride_seq, t->stride_head}, n[3] = {t->batch, t->seq, t->heads};
    if (tensor_elems(t) == 0) return 0;
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (st[b] < st[a]) { int64_t x = st[a]; st[a] = st[b]; st[b] = x; x = n[a]; n[a] = n[b]; n[b] = x; }
    int64_t span = t->dim;
    for (int a = 0; a < 3; a++) {
        if (n[a] == 1) continue;
        if (st[a] < span) return 1;
        span = st[a] * (n[a] - 1) + span;
    }
    return 0;
}

static int64_t tensor_bytes(const bsk_attn_tensor *t) { return tensor_span(t) * (int64_t)bsk_dtype_size(t->dtype); }

static bsk_status check_layout_full(const bsk_attn_layout *L)
{
    bsk_status s = bsk__attn_layout_check_desc(L);
    if (!s) s = bsk__attn_layout_check_location(L);
    if (!s && L->mem == BSK_MEM_HOST)
        s = bsk__attn_layout_check_lists(L, L->full_count, L->full_idx, L->part_count, L->part_idx);
    return s;
}

static bsk_status check_kv_lens(const int32_t *kv_lens, int64_t batch, int64_t seq_k, bsk_memory mem)
{
    if (!kv_lens) return BSK_SUCCESS;
    if (((uintptr_t)kv_lens & 3u) != 0) return BSK_ERR_MISALIGNED;
    bsk_status s = bsk__check_location(kv_lens, mem);
    if (s) return s;
    if (mem == BSK_MEM_HOST)
        for (int64_t b = 0; b < batch; b++)
            if (kv_lens[b] < 0 || kv_lens[b] > seq_k) return BSK_ERR_INVALID_ARGUMENT;
    return BSK_SUCCESS;
}

/* rows * 4 bytes of an lse array, saturated (rows < 2^62 may still pass INT64_MAX / 4). */
int64_t bsk__attn_lse_bytes(int64_t batch, int64_t heads, int64_t seq)
{
    int64_t rows = batch * heads * seq; /* < 2^62: bounded by check_tensor */
    return rows > INT64_MAX / 4 ? INT64_MAX : rows * 4;
}

/* Whether [p, p + bytes) overlaps anything the kernels read besides the tensors: the layout's four arrays
   and kv_lens. */
int bsk__attn_overlaps_reads(const void *p, int64_t bytes, const bsk_attn_layout *L, const int32_t *kv_lens,
                             int64_t batch)
{
    int64_t rows = bsk__attn_layout_rows(L), idx = rows * L->capacity;
    return bsk__overlaps(p, bytes, L->full_count, rows * 4) || bsk__overlaps(p, bytes, L->part_count, rows * 4) ||
           bsk__overlaps(p, bytes, L->full_idx, idx * 4) || bsk__overlaps(p, bytes, L->part_idx, idx * 4) ||
           bsk__overlaps(p, bytes, kv_lens, batch * 4);
}

/* Shared with the backward front end (attention_bwd.c), declared in attention_internal.h. */
bsk_status bsk__attn_check_tensor(const bsk_attn_tensor *t) { return check_tensor(t); }
int bsk__attn_self_overlaps(const bsk_attn_tensor *t) { return self_overlaps(t); }
int64_t bsk__attn_tensor_bytes(const bsk_attn_tensor *t) { return tensor_bytes(t); }

bsk_status bsk__attention_check(bsk_context *ctx, const bsk_attention_params *p, int o_out, bsk__attn_dims *dims)
{
    bsk_status s;
    if (!ctx || !p || !p->layout) return BSK_ERR_NULL_POINTER;
    const bsk_attn_tensor *q = &p->q, *k = &p->k, *v = &p->v, *o = &p->o;
    const bsk_attn_layout *L = p->layout;
    if ((s = check_tensor(q)) || (s = check_tensor(k)) || (s = check_tensor(v)) || (s = check_tensor(o))) return s;
    if ((s = bsk__attn_layout_check_desc(L))) return s;
    if (p->causal != 0 && p->causal != 1) return BSK_ERR_INVALID_ARGUMENT;
    if (p->causal_offset > MAX_OFFSET || p->causal_offset < -MAX_OFFSET || !isfinite(p->scale))
        return BSK_ERR_INVALID_ARGUMENT;
    if (q->dtype != k->dtype || q->dtype != v->dtype || q->dtype != o->dtype) return BSK_ERR_UNSUPPORTED;
    if (k->batch != q->batch || v->batch != q->batch || o->batch != q->batch || o->seq != q->seq ||
        v->seq != k->seq || o->heads != q->heads || v->heads != k->heads || k->dim != q->dim || v->dim != q->dim ||
        o->dim != q->dim)
        return BSK_ERR_SHAPE_MISMATCH;
    if (q->heads > 0 && (k->heads == 0 || q->heads % k->heads != 0)) return BSK_ERR_SHAPE_MISMATCH;
    if (L->seq_q != q->seq || L->seq_k != k->seq || (L->batch != 1 && L->batch != q->batch) ||
        (L->heads != 1 && L->heads != q->heads))
        return BSK_ERR_SHAPE_MISMATCH;
    bsk_memory m = q->mem;
    if (k->mem != m || v->mem != m || o->mem != m || L->mem != m) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_side(ctx, m))) return s;
    if ((s = bsk__check_location(q->data, m)) || (s = bsk__check_location(k->data, m)) || (s = bsk__check_location(v->data, m)) ||
        (s = bsk__check_location(o->data, m)) || (s = bsk__check_location(p->lse, m)))
        return s;
    if (p->lse && ((uintptr_t)p->lse & 3u) != 0) return BSK_ERR_MISALIGNED;
    if ((s = check_kv_lens(p->kv_lens, q->batch, k->seq, m))) return s;
    if ((s = check_layout_full(L))) return s;
    int64_t lse_bytes = bsk__attn_lse_bytes(q->batch, q->heads, q->seq), ob = tensor_bytes(o);
    if (o_out && (self_overlaps(o) || bsk__overlaps(o->data, ob, q->data, tensor_bytes(q)) ||
        bsk__overlaps(o->data, ob, k->data, tensor_bytes(k)) || bsk__overlaps(o->data, ob, v->data, tensor_bytes(v)) ||
        bsk__overlaps(o->data, ob, p->lse, lse_bytes) || bsk__overlaps(p->lse, lse_bytes, q->data, tensor_bytes(q)) ||
        bsk__overlaps(p->lse, lse_bytes, k->data, tensor_bytes(k)) || bsk__overlaps(p->lse, lse_bytes, v->data, tensor_bytes(v)) ||
        bsk__attn_overlaps_reads(o->data, ob, L, p->kv_lens, q->batch) ||
        bsk__attn_overlaps_reads(p->lse, lse_bytes, L, p->kv_lens, q->batch)))
        return BSK_ERR_INVALID_ARGUMENT;
    bsk__attn_dims d = {q->batch, q->heads, k->heads, q->seq, k->seq, q->dim, bsk_attn_layout_mq(L),
                        bsk_attn_layout_nb(L), p->scale != 0.0f ? p->scale : (float)(1.0 / sqrt((double)q->dim))};
    *dims = d;
    return BSK_SUCCESS;
}

static bsk_status bsk_attention_forward_body(bsk_context *ctx, const bsk_attention_params *p)
{
    bsk__attn_dims d;
    bsk_status s = bsk__attention_check(ctx, p, 1, &d);
    if (s) return s;
    if (tensor_elems(&p->q) == 0) return BSK_SUCCESS;
    if (p->q.mem == BSK_MEM_HOST) {
        ctx->last_kernel = "cpu-attention";
        return bsk_cpu_attention_forward(p, &d);
    }
#ifdef BSK_WITH_CUDA
    return bsk_cuda_attention_forward(ctx, p, &d);
#else
    return BSK_ERR_NO_DEVICE;
#endif
}

static bsk_status check_weight(const bsk_dense *w, int64_t dim, bsk_memory m)
{
    bsk_status s = bsk__check_dense(w);
    if (s) return s;
    if (w->rows != dim || w->cols < 1) return BSK_ERR_SHAPE_MISMATCH;
    if (w->cols > MAX_DIM) return BSK_ERR_UNSUPPORTED;
    if (w->mem != m) return BSK_ERR_WRONG_LOCATION;
    return bsk__check_dense_location(w);
}

static bsk_status bsk_topk_block_layout_body(bsk_context *ctx, const bsk_topk_params *p, bsk_attn_layout *out)
{
    bsk_status s;
    if (!ctx || !p || !out) return BSK_ERR_NULL_POINTER;
    const bsk_attn_tensor *q = &p->q, *k = &p->k;
    if ((s = check_tensor(q)) || (s = check_tensor(k))) return s;
    if ((s = bsk__attn_layout_check_desc(out))) return s;
    if (p->causal != 0 && p->causal != 1) return BSK_ERR_INVALID_ARGUMENT;
    if (p->keep_first != 0 && p->keep_first != 1) return BSK_ERR_INVALID_ARGUMENT;
    if (p->keep_diagonal != 0 && p->keep_diagonal != 1) return BSK_ERR_INVALID_ARGUMENT;
    if (p->causal_offset > MAX_OFFSET || p->causal_offset < -MAX_OFFSET) return BSK_ERR_INVALID_ARGUMENT;
    if (p->top_k < 1 || p->top_k < p->keep_first + p->keep_diagonal) return BSK_ERR_INVALID_ARGUMENT;
    if ((p->w_q == NULL) != (p->w_k == NULL)) return BSK_ERR_NULL_POINTER;
    if (q->dtype != k->dtype) return BSK_ERR_UNSUPPORTED;
    if (k->batch != q->batch || k->dim != q->dim) return BSK_ERR_SHAPE_MISMATCH;
    if (q->heads > 0 && (k->heads == 0 || q->heads % k->heads != 0)) return BSK_ERR_SHAPE_MISMATCH;
    if (p->pooled != 0 && p->pooled != 1) return BSK_ERR_INVALID_ARGUMENT;
    int64_t nb = bsk_attn_layout_nb(out);
    /* pooled: one row per query / key block of `out`; the sequence lengths are out's */
    const int64_t want_q = p->pooled ? bsk_attn_layout_mq(out) : out->seq_q, want_k = p->pooled ? nb : out->seq_k;
    if (want_q != q->seq || want_k != k->seq || out->batch != q->batch || out->heads != q->heads)
        return BSK_ERR_SHAPE_MISMATCH;
    if (out->capacity < (p->top_k < nb ? p->top_k : nb)) return BSK_ERR_SHAPE_MISMATCH;
    bsk_memory m = q->mem;
    if (k->mem != m || out->mem != m) return BSK_ERR_WRONG_LOCATION;
    if ((s = bsk__check_side(ctx, m))) return s;
    if ((s = bsk__check_location(q->data, m)) || (s = bsk__check_location(k->data, m))) return s;
    if (p->w_q) {
        if ((s = check_weight(p->w_q, q->dim, m)) || (s = check_weight(p->w_k, q->dim, m))) return s;
        if (p->w_q->cols != p->w_k->cols) return BSK_ERR_SHAPE_MISMATCH;
    }
    if ((s = check_kv_lens(p->kv_lens, q->batch, out->seq_k, m))) return s;
    s = bsk__check_location(out->full_count, m);
    if (!s) s = bsk__check_location(out->part_count, m);
    if (!s) s = bsk__check_location(out->full_idx, m);
    if (!s) s = bsk__check_location(out->part_idx, m);
    if (s) return s;
    if (bsk__attn_layout_rows(out) == 0) return BSK_SUCCESS;
    /* out's four arrays: apart from each other and from everything the gate reads (q, k, w_q, w_k, kv_lens) */
    const int64_t rows = bsk__attn_layout_rows(out), idx = rows * out->capacity;
    const void *oa[4] = {out->full_count, out->part_count, out->full_idx, out->part_idx};
    const uint64_t ob[4] = {(uint64_t)rows * 4, (uint64_t)rows * 4, (uint64_t)idx * 4, (uint64_t)idx * 4};
    for (int i = 0; i < 4; i++) {
        for (int j = i + 1; j < 4; j++)
            if (bsk__overlaps(oa[i], ob[i], oa[j], ob[j])) return BSK_ERR_INVALID_ARGUMENT;
        if (bsk__overlaps(oa[i], ob[i], q->data, tensor_bytes(q)) || bsk__overlaps(oa[i], ob[i], k->data, tensor_bytes(k)) ||
            bsk__overlaps(oa[i], ob[i], p->kv_lens, (uint64_t)q->batch * 4) ||
            (p->w_q && (bsk__overlaps(oa[i], ob[i], p->w_q->data, bsk__dense_bytes(p->w_q)) ||
                        bsk__overlaps(oa[i], ob[i], p->w_k->data, bsk__dense_bytes(p->w_k)))))
            return BSK_ERR_INVALID_ARGUMENT;
    }
    bsk__attn_dims d = {q->batch, q->heads, k->heads, out->seq_q, out->seq_k, q->dim, bsk_attn_layout_mq(out), nb, 1.0f};
    if (m == BSK_MEM_HOST) {
        ctx->last_kernel = "cpu-topk";
        return bsk_cpu_topk_block_layout(p, &d, out);
    }
#ifdef BSK_WITH_CUDA
    return bsk_cuda_topk_block_layout(ctx, p, &d, out);
#else
    return BSK_ERR_NO_DEVICE;
#endif
}

bsk_status bsk_attention_forward(bsk_context *ctx, const bsk_attention_params *p)
{
    bsk__trace_begin(ctx, "bsk_attention_forward");
    return bsk__trace_end(ctx, bsk_attention_forward_body(ctx, p));
}

bsk_status bsk_topk_block_layout(bsk_context *ctx, const bsk_topk_params *p, bsk_attn_layout *out)
{
    bsk__trace_begin(ctx, "bsk_topk_block_layout");
    return bsk__trace_end(ctx, bsk_topk_block_layout_body(ctx, p, out));
}
