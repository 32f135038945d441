/* attention_bwd_cpu.c — the CPU backend of bsk_attention_backward: float32 compute, the FlashAttention
   backward recurrences, deterministic.

   1. D[b,h,q] = rowsum(dO ∘ O) − d_lse (one pass, before anything else).
   2. The transposed layout: for each (layout, key block j), the query blocks i that keep tile (i, j), in
      increasing i (counted, prefix-summed, filled in row order: no sort needed).
   3. Work items, threaded (a shared counter hands them out; each item owns its output rows, so no two
      threads write one element and no sum depends on the thread count):
        dQ items (batch, head, query block): P and dS recomputed over the block's kept tiles, dQ accumulated;
        dK/dV items (batch, kv head, key block): over the heads of its group and the query blocks keeping
        the key block, dV += Pᵀ·dO and dK += dSᵀ·Q.
   Every scratch buffer is taken before the first output is written, so running out of memory leaves
   the outputs untouched. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attention_internal.h"

#define MAX_THREADS 64

typedef struct bwd_job {
    const bsk_attention_bwd_params *p;
    const bsk__attn_dims *d;
    const float *delta;           /* [batch*heads*seq_q] */
    const int32_t *t_ptr, *t_idx; /* transposed layout: column (l*nb + j) holds t_idx[t_ptr[c] .. t_ptr[c+1]) */
    int64_t group;                /* query heads per kv head */
    int64_t n_dq, n_kv;           /* items of each kind: dQ items first */
    int64_t next;                 /* next item, taken under `lock` */
    pthread_mutex_t lock;
} bwd_job;

typedef struct scratch { float *q, *g, *k, *v, *acc_a, *acc_b; } scratch;

/* Rows [s0, s0+n) of a (b, h) slice as float: dst[r*dim + c]. */
static void load_rows(const bsk_attn_tensor *t, int64_t b, int64_t h, int64_t s0, int64_t n, float *dst)
{
    for (int64_t r = 0; r < n; r++) {
        int64_t base = b * t->stride_batch + (s0 + r) * t->stride_seq + h * t->stride_head;
        for (int64_t c = 0; c < t->dim; c++) dst[r * t->dim + c] = bsk__load(t->data, t->dtype, base + c);
    }
}

static void store_rows(const bsk_attn_tensor *t, int64_t b, int64_t h, int64_t s0, int64_t n, const float *src,
                       float mul)
{
    for (int64_t r = 0; r < n; r++) {
        int64_t base = b * t->stride_batch + (s0 + r) * t->stride_seq + h * t->stride_head;
        for (int64_t c = 0; c < t->dim; c++) bsk__store(t->data, t->dtype, base + c, src[r * t->dim + c] * mul);
    }
}

static float dot(const float *a, const float *b, int64_t n)
{
    float acc = 0.0f;
    for (int64_t e = 0; e < n; e++) acc += a[e] * b[e];
    return acc;
}

/* dQ of query block i of (b, h): acc_a = sum over kept keys of dS · K, then scaled. */
static void dq_item(const bwd_job *J, int64_t item, scratch *w)
{
    const bsk_attention_bwd_params *p = J->p;
    const bsk__attn_dims *d = J->d;
    const bsk_attn_layout *L = p->layout;
    int64_t bq = L->block_q, bk = L->block_k, D = d->dim, cap = L->capacity;
    int64_t i = item % d->mq, bh = item / d->mq, h = bh % d->heads, b = bh / d->heads, hk = h / J->group;
    int64_t q0 = i * bq, q1 = q0 + bq < d->seq_q ? q0 + bq : d->seq_q, nr = q1 - q0;
    int64_t kv_len = p->kv_lens ? p->kv_lens[b] : d->seq_k, off = p->causal_offset;
    int64_t row = bsk__attn_layout_index(L, b, h) * d->mq + i;
    const float *lse = p->lse + (b * d->heads + h) * d->seq_q, *delta = J->delta + (b * d->heads + h) * d->seq_q;
    int32_t nf = L->full_count[row], np = L->part_count[row];

    memset(w->acc_a, 0, (size_t)(nr * D) * sizeof(float));
    load_rows(&p->q, b, h, q0, nr, w->q);
    load_rows(&p->d_o, b, h, q0, nr, w->g);
    for (int32_t t = 0; t < nf + np; t++) {
        int64_t j = t < nf ? L->full_idx[row * cap + t] : L->part_idx[row * cap + t - nf];
        int64_t k0 = j * bk;
        if (bsk__attn_tile_class(q0, q1, k0, k0 + bk, kv_len, p->causal, off) == 2) continue;
        int64_t k1 = k0 + bk < kv_len ? k0 + bk : kv_len;
        load_rows(&p->k, b, hk, k0, k1 - k0, w->k);
        load_rows(&p->v, b, hk, k0, k1 - k0, w->v);
        for (int64_t r = 0; r < nr; r++) {
            float l = lse[q0 + r], dl = delta[q0 + r];
            if (l == -INFINITY) continue; /* an empty row: P = 0 */
            int64_t kmax = k1 - 1;
            if (p->causal && kmax > q0 + r + off) kmax = q0 + r + off;
            const float *qr = w->q + r * D, *gr = w->g + r * D;
            float *acc = w->acc_a + r * D;
            for (int64_t c = 0; c <= kmax - k0; c++) {
                const float *kr = w->k + c * D, *vr = w->v + c * D;
                float pc = expf(dot(qr, kr, D) * d->scale - l);
                float ds = pc * (dot(gr, vr, D) - dl);
                for (int64_t e = 0; e < D; e++) acc[e] += ds * kr[e];
            }
        }
    }
    store_rows(&p->dq, b, h, q0, nr, w->acc_a, d->scale);
}

/* dK (acc_a) and dV (acc_b) of key block j of (b, hk): over the group's heads and the query blocks that
   keep the tile, in increasing order. */
static void dkv_item(const bwd_job *J, int64_t item, scratch *w)
{
    const bsk_attention_bwd_params *p = J->p;
    const bsk__attn_dims *d = J->d;
    const bsk_attn_layout *L = p->layout;
    int64_t bq = L->block_q, bk = L->block_k, D = d->dim;
    int64_t j = item % d->nb, bh = item / d->nb, hk = bh % d->kv_heads, b = bh / d->kv_heads;
    int64_t k0 = j * bk, kend = k0 + bk < d->seq_k ? k0 + bk : d->seq_k, nk = kend - k0;
    int64_t kv_len = p->kv_lens ? p->kv_lens[b] : d->seq_k, off = p->causal_offset;
    int64_t k1 = kend < kv_len ? kend : kv_len;

    memset(w->acc_a, 0, (size_t)(nk * D) * sizeof(float));
    memset(w->acc_b, 0, (size_t)(nk * D) * sizeof(float));
    if (k1 > k0) {
        load_rows(&p->k, b, hk, k0, k1 - k0, w->k);
        load_rows(&p->v, b, hk, k0, k1 - k0, w->v);
    }
    for (int64_t hh = 0; hh < J->group && k1 > k0; hh++) {
        int64_t h = hk * J->group + hh, col = bsk__attn_layout_index(L, b, h) * d->nb + j;
        const float *lse = p->lse + (b * d->heads + h) * d->seq_q, *delta = J->delta + (b * d->heads + h) * d->seq_q;
        for (int32_t e = J->t_ptr[col]; e < J->t_ptr[col + 1]; e++) {
            int64_t q0 = (int64_t)J->t_idx[e] * bq, q1 = q0 + bq < d->seq_q ? q0 + bq : d->seq_q, nr = q1 - q0;
            if (bsk__attn_tile_class(q0, q1, k0, k0 + bk, kv_len, p->causal, off) == 2) continue;
            load_rows(&p->q, b, h, q0, nr, w->q);
            load_rows(&p->d_o, b, h, q0, nr, w->g);
            for (int64_t r = 0; r < nr; r++) {
                float l = lse[q0 + r], dl = delta[q0 + r];
                if (l == -INFINITY) continue;
                int64_t kmax = k1 - 1;
                if (p->causal && kmax > q0 + r + off) kmax = q0 + r + off;
                const float *qr = w->q + r * D, *gr = w->g + r * D;
                for (int64_t c = 0; c <= kmax - k0; c++) {
                    const float *kr = w->k + c * D, *vr = w->v + c * D;
                    float pc = expf(dot(qr, kr, D) * d->scale - l);
                    float ds = pc * (dot(gr, vr, D) - dl);
                    float *dk = w->acc_a + c * D, *dv = w->acc_b + c * D;
                    for (int64_t x = 0; x < D; x++) {
                        dv[x] += pc * gr[x];
                        dk[x] += ds * qr[x];
                    }
                }
            }
        }
    }
    store_rows(&p->dk, b, hk, k0, nk, w->acc_a, d->scale);
    store_rows(&p->dv, b, hk, k0, nk, w->acc_b, 1.0f);
}

typedef struct worker_arg { bwd_job *J; scratch w; } worker_arg;

static void *worker(void *arg)
{
    worker_arg *A = (worker_arg *)arg;
    bwd_job *J = A->J;
    for (;;) {
        pthread_mutex_lock(&J->lock);
        int64_t it = J->next++;
        pthread_mutex_unlock(&J->lock);
        if (it >= J->n_dq + J->n_kv) break;
        if (it < J->n_dq) dq_item(J, it, &A->w);
        else dkv_item(J, it - J->n_dq, &A->w);
    }
    return NULL;
}

static void scratch_free(scratch *w)
{
    free(w->q); free(w->g); free(w->k); free(w->v); free(w->acc_a); free(w->acc_b);
}

/* One thread's scratch: rows of a query block (q, dO) and of a key block (k, v), and two accumulators big
   enough for either kind of item. 0 on allocation failure (nothing kept). */
static int scratch_alloc(scratch *w, int64_t bq, int64_t bk, int64_t D)
{
    int64_t ba = bq > bk ? bq : bk;
    w->q = (float *)malloc((size_t)(bq * D) * sizeof(float));
    w->g = (float *)malloc((size_t)(bq * D) * sizeof(float));
    w->k = (float *)malloc((size_t)(bk * D) * sizeof(float));
    w->v = (float *)malloc((size_t)(bk * D) * sizeof(float));
    w->acc_a = (float *)malloc((size_t)(ba * D) * sizeof(float));
    w->acc_b = (float *)malloc((size_t)(bk * D) * sizeof(float));
    if (w->q && w->g && w->k && w->v && w->acc_a && w->acc_b) return 1;
    scratch_free(w);
    return 0;
}

/* The transposed layout of a validated host layout: per column c = l*nb + j, the query blocks keeping tile
   (i, j) of layout l, ascending. *t_ptr (cols+1) and *t_idx are allocated; 0 on allocation failure. */
static int transpose_layout(const bsk_attn_layout *L, int64_t mq, int64_t nb, int32_t **t_ptr_out, int32_t **t_idx_out)
{
    int64_t nl = (int64_t)L->batch * L->heads, cols = nl * nb, cap = L->capacity;
    int32_t *t_ptr = (int32_t *)calloc((size_t)(cols + 1), sizeof(int32_t));
    int32_t *cur = (int32_t *)malloc((size_t)(cols + 1) * sizeof(int32_t));
    if (!t_ptr || !cur) { free(t_ptr); free(cur); return 0; }
    for (int64_t l = 0; l < nl; l++)
        for (int64_t i = 0; i < mq; i++) {
            int64_t row = l * mq + i;
            for (int32_t a = 0; a < L->full_count[row]; a++) t_ptr[l * nb + L->full_idx[row * cap + a] + 1]++;
            for (int32_t a = 0; a < L->part_count[row]; a++) t_ptr[l * nb + L->part_idx[row * cap + a] + 1]++;
        }
    for (int64_t c = 0; c < cols; c++) t_ptr[c + 1] += t_ptr[c];
    int32_t *t_idx = (int32_t *)malloc((size_t)(t_ptr[cols] + 1) * sizeof(int32_t));
    if (!t_idx) { free(t_ptr); free(cur); return 0; }
    memcpy(cur, t_ptr, (size_t)(cols + 1) * sizeof(int32_t));
    for (int64_t l = 0; l < nl; l++)
        for (int64_t i = 0; i < mq; i++) { /* rows in increasing i: every column comes out sorted */
            int64_t row = l * mq + i;
            for (int32_t a = 0; a < L->full_count[row]; a++) t_idx[cur[l * nb + L->full_idx[row * cap + a]]++] = (int32_t)i;
            for (int32_t a = 0; a < L->part_count[row]; a++) t_idx[cur[l * nb + L->part_idx[row * cap + a]]++] = (int32_t)i;
        }
    free(cur);
    *t_ptr_out = t_ptr;
    *t_idx_out = t_idx;
    return 1;
}

bsk_status bsk_cpu_attention_backward(const bsk_attention_bwd_params *p, const bsk__attn_dims *d)
{
    bwd_job J;
    memset(&J, 0, sizeof J);
    J.p = p;
    J.d = d;
    J.group = d->kv_heads > 0 ? d->heads / d->kv_heads : 0;
    J.n_dq = d->batch * d->heads * d->mq;
    J.n_kv = d->batch * d->kv_heads * d->nb;
    if (J.n_dq + J.n_kv == 0) return BSK_SUCCESS;
    int64_t nrows = d->batch * d->heads * d->seq_q;
    float *delta = (float *)malloc((size_t)(nrows + 1) * sizeof(float));
    int32_t *t_ptr = NULL, *t_idx = NULL;
    if (!delta || !transpose_layout(p->layout, d->mq, d->nb, &t_ptr, &t_idx)) {
        free(delta);
        return BSK_ERR_OUT_OF_MEMORY;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t nt = ncpu > 0 ? ncpu : 1;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > J.n_dq + J.n_kv) nt = J.n_dq + J.n_kv;
    worker_arg args[MAX_THREADS];
    int64_t have = 0;
    while (have < nt && scratch_alloc(&args[have].w, p->layout->block_q, p->layout->block_k, d->dim)) {
        args[have].J = &J;
        have++;
    }
    if (have == 0) {
        free(delta); free(t_ptr); free(t_idx);
        return BSK_ERR_OUT_OF_MEMORY;
    }
    /* D = rowsum(dO ∘ O), from the stored (rounded) O as the GPU does */
    for (int64_t x = 0; x < nrows; x++) {
        int64_t q = x % d->seq_q, bh = x / d->seq_q, h = bh % d->heads, b = bh / d->heads;
        int64_t bo = b * p->o.stride_batch + q * p->o.stride_seq + h * p->o.stride_head;
        int64_t bg = b * p->d_o.stride_batch + q * p->d_o.stride_seq + h * p->d_o.stride_head;
        float acc = 0.0f;
        for (int64_t e = 0; e < d->dim; e++)
            acc += bsk__load(p->o.data, p->o.dtype, bo + e) * bsk__load(p->d_o.data, p->d_o.dtype, bg + e);
        delta[x] = p->d_lse ? acc - p->d_lse[x] : acc; /* dlse/dS = P: it folds into D */
    }
    J.delta = delta;
    J.t_ptr = t_ptr;
    J.t_idx = t_idx;
    pthread_mutex_init(&J.lock, NULL);
    pthread_t th[MAX_THREADS];
    int64_t started = 0;
    for (int64_t t = 1; t < have; t++) {
        if (pthread_create(&th[started], NULL, worker, &args[t]) != 0) break;
        started++;
    }
    worker(&args[0]);
    for (int64_t t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&J.lock);
    for (int64_t t = 0; t < have; t++) scratch_free(&args[t].w);
    free(delta); free(t_ptr); free(t_idx);
    return BSK_SUCCESS;
}
