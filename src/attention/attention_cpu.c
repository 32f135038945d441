/* attention_cpu.c — the CPU reference backend of bsk_attention_forward: float32 compute, online softmax
   over the kept tiles of each (batch, head, query block), threaded over those work items. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attention_internal.h"

typedef struct job {
    const bsk_attention_params *p;
    const bsk__attn_dims *d;
    int64_t items;
    int64_t next;            /* next work item, taken under `lock` */
    pthread_mutex_t lock;
} job;

/* Rows of a (b, h) slice of a tensor as float: dst[r*dim + c] = t[b, s0 + r, h, c]. */
static void load_rows(const bsk_attn_tensor *t, int64_t b, int64_t h, int64_t s0, int64_t n, float *dst)
{
    for (int64_t r = 0; r < n; r++) {
        int64_t base = b * t->stride_batch + (s0 + r) * t->stride_seq + h * t->stride_head;
        for (int64_t c = 0; c < t->dim; c++) dst[r * t->dim + c] = bsk__load(t->data, t->dtype, base + c);
    }
}

typedef struct scratch { float *q, *k, *v, *s, *m, *l, *acc; } scratch;

static void run_item(const bsk_attention_params *p, const bsk__attn_dims *d, int64_t item, scratch *w)
{
    const bsk_attn_layout *L = p->layout;
    int64_t bq = L->block_q, bk = L->block_k, D = d->dim, cap = L->capacity;
    int64_t i = item % d->mq, bh = item / d->mq, h = bh % d->heads, b = bh / d->heads;
    int64_t hk = h / (d->heads / d->kv_heads);
    int64_t q0 = i * bq, q1 = q0 + bq < d->seq_q ? q0 + bq : d->seq_q, nr = q1 - q0;
    int64_t kv_len = p->kv_lens ? p->kv_lens[b] : d->seq_k, off = p->causal_offset;
    int64_t row = bsk__attn_layout_index(L, b, h) * d->mq + i;
    int32_t nf = L->full_count[row], np = L->part_count[row];

    load_rows(&p->q, b, h, q0, nr, w->q);
    for (int64_t r = 0; r < nr; r++) { w->m[r] = -INFINITY; w->l[r] = 0.0f; }
    memset(w->acc, 0, (size_t)(nr * D) * sizeof(float));

    for (int32_t t = 0; t < nf + np; t++) {
        int64_t j = t < nf ? L->full_idx[row * cap + t] : L->part_idx[row * cap + t - nf];
        if (j < 0 || j >= d->nb) continue;
        int64_t k0 = j * bk;
        if (bsk__attn_tile_class(q0, q1, k0, k0 + bk, kv_len, p->causal, off) == 2) continue;
        int64_t k1 = k0 + bk < kv_len ? k0 + bk : kv_len;
        load_rows(&p->k, b, hk, k0, k1 - k0, w->k);
        load_rows(&p->v, b, hk, k0, k1 - k0, w->v);
        for (int64_t r = 0; r < nr; r++) {
            int64_t kmax = k1 - 1;
            if (p->causal && kmax > q0 + r + off) kmax = q0 + r + off;
            if (kmax < k0) continue;
            int64_t ns = kmax - k0 + 1;
            const float *qr = w->q + r * D;
            float mx = -INFINITY;
            for (int64_t c = 0; c < ns; c++) {
                const float *kr = w->k + c * D;
                float acc = 0.0f;
                for (int64_t e = 0; e < D; e++) acc += qr[e] * kr[e];
                w->s[c] = acc * d->scale;
                if (w->s[c] > mx) mx = w->s[c];
            }
            float m_new = w->m[r] > mx ? w->m[r] : mx;
            float alpha = expf(w->m[r] - m_new); /* m = -inf before the first tile: alpha = 0 */
            float sum = 0.0f, *o = w->acc + r * D;
            for (int64_t e = 0; e < D; e++) o[e] *= alpha;
            for (int64_t c = 0; c < ns; c++) {
                float pc = expf(w->s[c] - m_new);
                sum += pc;
                const float *vr = w->v + c * D;
                for (int64_t e = 0; e < D; e++) o[e] += pc * vr[e];
            }
            w->l[r] = w->l[r] * alpha + sum;
            w->m[r] = m_new;
        }
    }

    const bsk_attn_tensor *O = &p->o;
    for (int64_t r = 0; r < nr; r++) {
        int64_t base = b * O->stride_batch + (q0 + r) * O->stride_seq + h * O->stride_head;
        float inv = w->l[r] > 0.0f ? 1.0f / w->l[r] : 0.0f;
        for (int64_t e = 0; e < D; e++) bsk__store(O->data, O->dtype, base + e, w->acc[r * D + e] * inv);
        if (p->lse) p->lse[(b * d->heads + h) * d->seq_q + q0 + r] = w->l[r] > 0.0f ? w->m[r] + logf(w->l[r]) : -INFINITY;
    }
}

typedef struct worker_arg { job *J; scratch w; } worker_arg;

static void *worker(void *arg)
{
    worker_arg *A = (worker_arg *)arg;
    job *J = A->J;
    for (;;) {
        pthread_mutex_lock(&J->lock);
        int64_t it = J->next++;
        pthread_mutex_unlock(&J->lock);
        if (it >= J->items) break;
        run_item(J->p, J->d, it, &A->w);
    }
    return NULL;
}

static void scratch_free(scratch *w)
{
    free(w->q); free(w->k); free(w->v); free(w->s); free(w->m); free(w->l); free(w->acc);
}

/* Scratch for one thread; 0 on allocation failure (nothing kept). */
static int scratch_alloc(scratch *w, int64_t bq, int64_t bk, int64_t D)
{
    w->q = (float *)malloc((size_t)(bq * D) * sizeof(float));
    w->k = (float *)malloc((size_t)(bk * D) * sizeof(float));
    w->v = (float *)malloc((size_t)(bk * D) * sizeof(float));
    w->s = (float *)malloc((size_t)bk * sizeof(float));
    w->m = (float *)malloc((size_t)bq * sizeof(float));
    w->l = (float *)malloc((size_t)bq * sizeof(float));
    w->acc = (float *)malloc((size_t)(bq * D) * sizeof(float));
    if (w->q && w->k && w->v && w->s && w->m && w->l && w->acc) return 1;
    scratch_free(w);
    return 0;
}

#define MAX_THREADS 64

bsk_status bsk_cpu_attention_forward(const bsk_attention_params *p, const bsk__attn_dims *d)
{
    job J;
    J.p = p;
    J.d = d;
    J.items = d->batch * d->heads * d->mq;
    J.next = 0;
    if (J.items == 0) return BSK_SUCCESS;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t nt = ncpu > 0 ? ncpu : 1;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > J.items) nt = J.items;
    /* All scratch is taken before any output is written, so running out of memory leaves O untouched;
       fewer threads is fine when only some allocations succeed. */
    worker_arg args[MAX_THREADS];
    int64_t have = 0;
    while (have < nt && scratch_alloc(&args[have].w, p->layout->block_q, p->layout->block_k, d->dim)) {
        args[have].J = &J;
        have++;
    }
    if (have == 0) return BSK_ERR_OUT_OF_MEMORY;
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
    return BSK_SUCCESS;
}
