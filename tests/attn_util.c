/* attn_util.c — attention test fixtures (see attn_util.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn_util.h"
#include "../src/internal.h"
#include "../src/attention/attention_internal.h"

attn_tbuf attn_tensor_make(int64_t B, int64_t S, int64_t H, int64_t D, bsk_dtype dt, int order, int64_t pad, bsk_rng *r,
                           int poison)
{
    attn_tbuf tb;
    memset(&tb, 0, sizeof tb);
    tb.t.batch = B; tb.t.seq = S; tb.t.heads = H; tb.t.dim = D;
    tb.t.dtype = dt; tb.t.mem = BSK_MEM_HOST;
    if (order == BSHD) {
        tb.t.stride_head = D;
        tb.t.stride_seq = H * D + pad;
        tb.t.stride_batch = S * tb.t.stride_seq;
    } else {
        tb.t.stride_seq = D + pad;
        tb.t.stride_head = S * tb.t.stride_seq;
        tb.t.stride_batch = H * tb.t.stride_head;
    }
    tb.elems = B * tb.t.stride_batch + 8;
    tb.host = malloc((size_t)tb.elems * bsk_dtype_size(dt));
    for (int64_t i = 0; i < tb.elems; i++) bsk__store(tb.host, dt, i, poison ? NAN : bsk_rng_sym(r));
    tb.t.data = tb.host;
    return tb;
}

void attn_tensor_poison(attn_tbuf *tb)
{
    for (int64_t i = 0; i < tb->elems; i++) bsk__store(tb->host, tb->t.dtype, i, NAN);
}

void attn_grid_spec(int n, int dt, int D, int bq, int causal, attn_spec *sp, char *what, size_t what_size)
{
    memset(sp, 0, sizeof *sp);
    sp->B = 2; sp->H = 4; sp->HK = n % 3 == 0 ? 1 : (n % 3 == 1 ? 2 : 4);
    sp->SQ = 200 + 37 * (n % 4); sp->SK = n % 5 == 0 ? sp->SQ + 70 : sp->SQ;
    sp->D = D; sp->bq = bq; sp->bk = (n & 2) ? 128 : 64;
    sp->dt = dt ? BSK_BF16 : BSK_F16;
    sp->order = n & 1; sp->causal = causal;
    sp->off = sp->SK - sp->SQ;
    sp->kind = causal ? (n % 4 == 1 ? 1 : 2 + (n % 3)) : (n % 4 == 0 ? 0 : 2 + (n % 3));
    sp->kv_lens = n % 3 == 2;
    sp->pad = (n % 4 == 3) ? 8 : 0;
    sp->empty_qb = 1;
    snprintf(what, what_size, "%s D%d bq%d bk%d causal%d kind%d hk%lld order%d", dt ? "bf16" : "f16", D, bq, sp->bk, causal,
             sp->kind, (long long)sp->HK, sp->order);
}

bsk_status attn_random_layout(int64_t SQ, int64_t SK, int32_t bq, int32_t bk, int32_t lb, int32_t lh, double density,
                              int causal, int64_t off, int64_t empty_qb, bsk_rng *r, bsk_attn_layout *out)
{
    int64_t mq = (SQ + bq - 1) / bq, nb = (SK + bk - 1) / bk, n = (int64_t)lb * lh * mq * nb;
    uint8_t *mask = (uint8_t *)malloc((size_t)n + 1);
    for (int64_t x = 0; x < n; x++) mask[x] = bsk_rng_uniform(r) < density;
    if (empty_qb >= 0 && empty_qb < mq) memset(mask + empty_qb * nb, 0, (size_t)nb);
    bsk_status s = bsk_attn_layout_from_mask(SQ, SK, bq, bk, lb, lh, mask, causal, off, out);
    free(mask);
    return s;
}

bsk_status attn_spec_layout(const attn_spec *sp, bsk_rng *r, bsk_attn_layout *out)
{
    switch (sp->kind) {
    case 0: return bsk_attn_layout_dense(sp->SQ, sp->SK, sp->bq, sp->bk, out);
    case 1: return bsk_attn_layout_causal(sp->SQ, sp->SK, sp->bq, sp->bk, sp->off, out);
    case 2: return bsk_attn_layout_local(sp->SQ, sp->SK, sp->bq, sp->bk, 1, 1, 1, sp->causal, sp->off, out);
    case 3:
        return attn_random_layout(sp->SQ, sp->SK, sp->bq, sp->bk, (int32_t)sp->B, (int32_t)sp->H, 0.4, sp->causal, sp->off,
                                  sp->empty_qb, r, out);
    default: return attn_random_layout(sp->SQ, sp->SK, sp->bq, sp->bk, 1, 1, 0.5, sp->causal, sp->off, sp->empty_qb, r, out);
    }
}

int32_t *attn_spec_kv_lens(const attn_spec *sp, bsk_rng *r)
{
    if (!sp->kv_lens) return NULL;
    int32_t *lens = (int32_t *)malloc((size_t)sp->B * 4);
    for (int64_t b = 0; b < sp->B; b++) lens[b] = (int32_t)bsk_rng_int(r, b == 0 ? 0 : 1, sp->SK);
    if (sp->kv_lens == 2) lens[0] = 0; /* a batch entry with no keys at all */
    return lens;
}

void attn_allowed_keys(const bsk_attn_layout *L, int64_t b, int64_t h, int64_t q, int64_t SK, int64_t kv_len, int causal,
                       int64_t off, uint8_t *allowed)
{
    int64_t row = bsk__attn_layout_index(L, b, h) * bsk_attn_layout_mq(L) + q / L->block_q;
    memset(allowed, 0, (size_t)SK + 1);
    for (int list = 0; list < 2; list++) {
        int32_t n = list ? L->part_count[row] : L->full_count[row];
        const int32_t *idx = (list ? L->part_idx : L->full_idx) + row * L->capacity;
        for (int32_t a = 0; a < n; a++)
            for (int64_t k = (int64_t)idx[a] * L->block_k; k < ((int64_t)idx[a] + 1) * L->block_k && k < SK; k++)
                allowed[k] = 1;
    }
    for (int64_t k = 0; k < SK; k++)
        if (k >= kv_len || (causal && k > q + off)) allowed[k] = 0;
}

void attn_load_rows(const bsk_attn_tensor *T, int64_t b, int64_t h, int64_t S, double *out)
{
    for (int64_t s = 0; s < S; s++)
        for (int64_t d = 0; d < T->dim; d++) out[s * T->dim + d] = bsk__load(T->data, T->dtype, attn_tidx(T, b, s, h, d));
}

int attn_gpu_ctx(bsk_context **ctx) { return bsk_create(ctx, BSK_BACKEND_CUDA) == BSK_SUCCESS; }

void *attn_to_dev(const void *h, size_t bytes)
{
    void *d = NULL;
    if (bsk_cuda_malloc(&d, bytes ? bytes : 1)) return NULL;
    if (bsk_cuda_memcpy(d, h, bytes, 1, 0)) { bsk_cuda_free(d); return NULL; }
    return d;
}
